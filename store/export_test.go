package store

// MemoryRows returns the rows m holds, as they are (tests only).
func MemoryRows(m *Memory) []Entry { return m.b.snapshot() }
