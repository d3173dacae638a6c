package incident_test

import (
	"encoding/json"
	"testing"

	"github.com/blackbox-audit/blackbox/core"
	"github.com/blackbox-audit/blackbox/incident"
)

// An explained position is a core.Position in an epoch: made from the
// engine's pair and given back as it, with no field copied by hand, and
// its JSON (explain --json) as before.
func TestPositionIsACorePositionInAnEpoch(t *testing.T) {
	for _, tc := range []struct {
		name     string
		epoch    int64
		pos      core.Position
		wantJSON string
	}{
		{"file", 7, core.Position{Offset: 10}, `{"epoch":7,"offset":10}`},
		{"kafka", 3, core.Position{Key: "orders/2", Offset: 41}, `{"epoch":3,"key":"orders/2","offset":41}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := incident.PositionOf(tc.epoch, tc.pos)
			if p.Epoch != tc.epoch || p.Position() != tc.pos {
				t.Fatalf("PositionOf(%d, %v) = %+v: epoch %d, position %v; want %d, %v", tc.epoch, tc.pos, p, p.Epoch, p.Position(), tc.epoch, tc.pos)
			}
			d := &core.Delivery{Epoch: tc.epoch, Position: tc.pos}
			if !d.AlreadyApplied(p.Epoch, p.Position()) {
				t.Fatalf("a delivery at %+v is not applied already through itself", p)
			}
			b, err := json.Marshal(p)
			if err != nil {
				t.Fatal(err)
			}
			if got := string(b); got != tc.wantJSON {
				t.Fatalf("JSON %s, want %s", got, tc.wantJSON)
			}
		})
	}
}
