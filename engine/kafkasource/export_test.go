package kafkasource

import (
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/blackbox-audit/blackbox/engine"
)

// SetRunStarted has Run call f with its client before its first duty
// cycle (set before Run).
func SetRunStarted(s *Source, f func(*kgo.Client)) { s.runStarted = f }

// Checker is the source's committer as the engine sees it once Run set
// it: its RewindChecker.
func Checker(s *Source) engine.RewindChecker { return committer{s} }
