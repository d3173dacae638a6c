package incident

import "fmt"

// onDisk compares the pointer and state given with the recordings.
func (x *explainer) onDisk(opts Options) {
	if opts.Pointer == nil && opts.State == nil {
		return
	}
	feed := opts.Feed
	if feed == "" {
		feeds := map[string]bool{}
		for _, d := range x.runs {
			for in := range d.inputs.all() {
				if in.delivery {
					feeds[in.feed] = true
				}
			}
		}
		if len(feeds) == 1 {
			for f := range feeds {
				feed = f
			}
		}
	}
	od := &OnDisk{Feed: feed}
	// find returns the last input of the feed at pos across the runs.
	find := func(pos Position) *Input {
		var found *Input
		for _, d := range x.runs {
			for in := range d.inputs.all() {
				if in.feed == feed && in.delivery && place(in.pos) == place(pos) {
					i := x.input(d, &in)
					found = &i
				}
			}
		}
		return found
	}
	if opts.Pointer != nil {
		od.Pointer = opts.Pointer
		od.PointerInput = find(*opts.Pointer)
		if od.PointerInput == nil && opts.Pointer.Offset != 0 {
			x.f.Losses = append(x.f.Losses, Loss{Kind: LossInNoRun, Detail: fmt.Sprintf(
				"the pointer holds epoch %d offset %d of feed %q, the position of no input of any run: the inputs before it may be in no run",
				opts.Pointer.Epoch, opts.Pointer.Offset, feed), Rows: []Ref{}})
		}
	}
	if s := opts.State; s != nil {
		pos := PositionOf(s.Epoch, s.Position)
		od.State = &State{Applied: s.Applied, Position: pos}
		od.StateInput = find(pos)
		if od.StateInput == nil && s.Applied != 0 {
			x.f.Losses = append(x.f.Losses, Loss{Kind: LossInNoRun, Detail: fmt.Sprintf(
				"the state applied through epoch %d offset %d of feed %q, the position of no input of any run: it applied an input no recording holds",
				pos.Epoch, pos.Offset, feed), Rows: []Ref{}})
		}
	}
	x.f.OnDisk = od
}
