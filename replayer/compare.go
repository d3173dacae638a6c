package replayer

import (
	"fmt"
	"strings"

	"github.com/google/go-cmp/cmp"

	"github.com/blackbox-audit/blackbox/recorder"
)

// Decoded is one output decoded with the codec, as go-cmp compares it.
// Undecodable holds the raw payload and the error when the codec refuses it.
type decoded struct {
	Sink        string
	Value       any
	Undecodable string
}

// decodeAll decodes each output's payload with codec and removes the JSON
// object keys in ignore (at any depth).
func decodeAll(codec recorder.Codec, os []output, ignore map[string]bool) []decoded {
	ds := make([]decoded, len(os))
	for i, o := range os {
		ds[i].Sink = o.sink
		v, err := codec.Decode(o.payload)
		if err != nil {
			ds[i].Undecodable = fmt.Sprintf("%s (%v)", o.payload, err)
			continue
		}
		ds[i].Value = strip(v, ignore)
	}
	return ds
}

// strip removes the keys in ignore from every map[string]any in v, in place.
func strip(v any, ignore map[string]bool) any {
	if len(ignore) == 0 {
		return v
	}
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			if ignore[k] {
				delete(x, k)
				continue
			}
			x[k] = strip(e, ignore)
		}
	case []any:
		for i, e := range x {
			x[i] = strip(e, ignore)
		}
	}
	return v
}

// diffOutputs is a readable diff of two output lists (-want +got), "" when
// they are equal. Outputs are compared pairwise, k-th with k-th, each with
// go-cmp; outputs only on one side are listed whole. The text is normalised
// (go-cmp's non-breaking spaces become spaces) so a report's text is stable.
func diffOutputs(want, got []decoded) string {
	var b strings.Builder
	for k := 0; k < max(len(want), len(got)); k++ {
		switch {
		case k >= len(got):
			fmt.Fprintf(&b, "output %d: only in the recording: %s\n", k+1, show(want[k]))
		case k >= len(want):
			fmt.Fprintf(&b, "output %d: only in the replay: %s\n", k+1, show(got[k]))
		default:
			w, g := want[k], got[k]
			if w.Sink != g.Sink {
				fmt.Fprintf(&b, "output %d: sink %q, replayed to sink %q\n", k+1, w.Sink, g.Sink)
			}
			if w.Undecodable != "" || g.Undecodable != "" {
				if d := cmp.Diff(w.Undecodable, g.Undecodable); d != "" {
					fmt.Fprintf(&b, "output %d: undecodable (-want +got):\n%s", k+1, stable(d))
				}
				continue
			}
			if d := cmp.Diff(w.Value, g.Value); d != "" {
				fmt.Fprintf(&b, "output %d to %q (-want +got):\n%s", k+1, g.Sink, stable(d))
			}
		}
	}
	return strings.TrimRight(b.String(), "\n")
}

func show(d decoded) string {
	if d.Undecodable != "" {
		return d.Sink + ": " + d.Undecodable
	}
	return fmt.Sprintf("%s: %v", d.Sink, d.Value)
}

// stable replaces go-cmp's non-breaking spaces with spaces.
func stable(s string) string { return strings.ReplaceAll(s, "\u00a0", " ") }
