package apps

// WithStatePath sets a ledger's state path after construction (to make a
// save fail in tests).
func WithStatePath(l *Ledger, path string) *Ledger {
	l.path = path
	return l
}
