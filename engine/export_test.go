package engine

// SetMaxMarks lowers the bound of pending drop marks for a test; the
// returned func restores it.
func SetMaxMarks(n int) func() {
	old := maxMarks
	maxMarks = n
	return func() { maxMarks = old }
}
