package engine

// Input is one item being dispatched to a group: what the feed delivered,
// under which sequence and delivery. The observer hooks receive it; it is
// valid only during the hook call and reused afterwards.
type Input struct {
	Group    string // the group dispatching the item
	Feed     string
	Seq      int64
	Delivery *Delivery // nil for an item without a source position
	Item     any
}

// Drop is a run of items lost for one queue: consecutive drops at the same
// queue position coalesced into one.
type Drop struct {
	Feed       string
	Group      string
	Processors []string // the group's processors, which all lost the items
	Count      int64
	FirstSeq   int64
	LastSeq    int64
	Offset     int64 // source offset of the last dropped item, 0 for a push feed
	Reason     string
	// Approximate: the drop marks overflowed, so this count may include
	// drops that happened before the position where it is reported.
	Approximate bool
}

// Observer is a set of hooks the engine calls as it works; any may be nil.
// Hooks are called on the goroutine of the group concerned (Started and
// Stopped included), never concurrently for one group. A hook must not block
// for long: the group waits for it. The recorder is one Observer among
// others; combine several with Then.
type Observer struct {
	// Started: a processor's stream begins, before its group handles anything.
	Started func(processor string, p Processor)
	// BeforeDispatch: an item is about to be dispatched to the group's processors.
	BeforeDispatch func(group string, in *Input)
	// Received: a processor is about to handle the item (every attempt). The
	// handler may mutate the item afterwards: copy what you keep.
	Received func(processor string, in *Input)
	// Handled: a processor finished an attempt: outputs emitted, clock
	// readings, completions registered, and Err when the attempt failed.
	Handled func(processor string, in *Input, t *Trace)
	// Failed: the first failed attempt of the item in a processor; retries
	// are not reported again.
	Failed func(processor string, in *Input, err error)
	// CompletionFailed: the first failure, within this item, of a completion
	// callback registered by processor.
	CompletionFailed func(processor string, in *Input, err error)
	// AfterDispatch: the item's delivery is complete (processors and
	// completions done) and it is about to count as dispatched.
	AfterDispatch func(group string, in *Input)
	// Dropped: items were lost for the group's queue right before the next
	// item it will dispatch (or before its end).
	Dropped func(group string, d Drop)
	// TimerFired: a processor's timer ran (t.Timer is its number).
	TimerFired func(processor string, t *Trace)
	// Stopped: a processor's stream ends with a clean stop of the engine.
	Stopped func(processor string)
}

// Then returns an Observer that calls o's hooks and then next's.
func (o Observer) Then(next Observer) Observer {
	return Observer{
		Started:          then2(o.Started, next.Started),
		BeforeDispatch:   then2(o.BeforeDispatch, next.BeforeDispatch),
		Received:         then2(o.Received, next.Received),
		Handled:          then3(o.Handled, next.Handled),
		Failed:           then3(o.Failed, next.Failed),
		CompletionFailed: then3(o.CompletionFailed, next.CompletionFailed),
		AfterDispatch:    then2(o.AfterDispatch, next.AfterDispatch),
		Dropped:          then2(o.Dropped, next.Dropped),
		TimerFired:       then2(o.TimerFired, next.TimerFired),
		Stopped:          then1(o.Stopped, next.Stopped),
	}
}

func then1[A any](f, g func(A)) func(A) {
	if f == nil {
		return g
	}
	if g == nil {
		return f
	}
	return func(a A) { f(a); g(a) }
}

func then2[A, B any](f, g func(A, B)) func(A, B) {
	if f == nil {
		return g
	}
	if g == nil {
		return f
	}
	return func(a A, b B) { f(a, b); g(a, b) }
}

func then3[A, B, C any](f, g func(A, B, C)) func(A, B, C) {
	if f == nil {
		return g
	}
	if g == nil {
		return f
	}
	return func(a A, b B, c C) { f(a, b, c); g(a, b, c) }
}
