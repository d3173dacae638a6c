//go:build race

package replayer_test

func init() { raceEnabled = true }
