package engine_test

import (
	"errors"
	"testing"

	"github.com/blackbox-audit/blackbox/engine"
)

// TestParsePolicyKindReadsEveryNameOfAPolicy: the CLI's --policy and a
// golden case's "policy" are read by one function: a kind's own name or its
// short form, in any case, with '-' or '_'; anything else is ErrConfig.
func TestParsePolicyKindReadsEveryNameOfAPolicy(t *testing.T) {
	for _, tc := range []struct {
		name string
		want engine.PolicyKind
	}{
		{"pause", engine.PauseKind}, {"PAUSE", engine.PauseKind},
		{"drop", engine.DropAfterSpinKind}, {"drop-after-spin", engine.DropAfterSpinKind},
		{"DROP_AFTER_SPIN", engine.DropAfterSpinKind},
		{"block", engine.BlockKind}, {"Block-With-Deadline", engine.BlockKind}, {"BLOCK_WITH_DEADLINE", engine.BlockKind},
	} {
		got, err := engine.ParsePolicyKind(tc.name)
		if err != nil || got != tc.want {
			t.Errorf("ParsePolicyKind(%q) = %q, %v; want %q", tc.name, got, err, tc.want)
		}
	}
	for _, name := range []string{"", "wait", "drop after spin", "pause!"} {
		if got, err := engine.ParsePolicyKind(name); !errors.Is(err, engine.ErrConfig) {
			t.Errorf("ParsePolicyKind(%q) = %q, %v; want an error wrapping ErrConfig", name, got, err)
		}
	}
}
