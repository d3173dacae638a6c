package engine

// SetMaxMarks lowers the bound of pending drop marks for a test; the
// returned func restores it.
func SetMaxMarks(n int) func() {
	old := maxMarks
	maxMarks = n
	return func() { maxMarks = old }
}

// Intake is the source handle of f, for tests that publish as a source
// would without writing one.
func (f *Feed) Intake() *Intake { return &Intake{f} }
