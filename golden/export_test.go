package golden

// SetTestHook sets the function called at the named points of an update
// (tests hold a child process there and kill it).
func SetTestHook(f func(point string)) { testHook = f }
