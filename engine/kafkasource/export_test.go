package kafkasource

import "github.com/twmb/franz-go/pkg/kgo"

// SetRunStarted has Run call f with its client before its first duty
// cycle (set before Run).
func SetRunStarted(s *Source, f func(*kgo.Client)) { s.runStarted = f }
