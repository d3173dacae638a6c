package console

// SetBeforeSeek makes w run f between an applied seek's check of its plan
// and the engine's seek.
func SetBeforeSeek(w *Window, f func()) { w.beforeSeek = f }
