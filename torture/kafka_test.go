package torture

import (
	"context"
	"errors"
	"net"
	"testing"
)

// TestABounceThatLosesAPartitionsOffsetsIsInconclusive checks that a
// bounce after which kfake serves a partition from lower offsets than
// before (it forgets a partition whose every record was deleted: seed
// 1796195530601637317) makes the scenario inconclusive, with the offsets
// before and after as evidence, and that a bounce keeping the offsets does
// not.
func TestABounceThatLosesAPartitionsOffsetsIsInconclusive(t *testing.T) {
	tests := []struct {
		name string
		ops  []inputOp
		// lost is the evidence wanted, nil for a bounce that keeps the
		// offsets.
		lost *bounceLostError
	}{
		{name: "records left", ops: []inputOp{{Kind: opAppend, N: 4}}},
		{name: "records appended after a retention", ops: []inputOp{{Kind: opAppend, N: 4}, {Kind: opRetention}, {Kind: opAppend, N: 2}}},
		{name: "every record deleted", ops: []inputOp{{Kind: opAppend, N: 4}, {Kind: opRetention}},
			lost: &bounceLostError{topic: "t", partition: 0, before: logBounds{4, 4}, after: logBounds{0, 0}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := context.Background()
			s := &scenarioSpec{Seed: 1, App: "alerts", Source: "kafka", Partitions: 1}
			k, err := newKafkaInput(t.TempDir(), 1, newLineGen(s), keyOf)
			if err != nil {
				t.Fatal(err)
			}
			defer k.close()
			none := func(int32) int64 { return 0 }
			for _, op := range tt.ops {
				if err := k.apply(ctx, op, none); err != nil {
					t.Fatalf("%s %d: %v", op.Kind, op.N, err)
				}
			}
			err = k.apply(ctx, inputOp{Kind: opBounce}, none)
			var inc inconclusiveError
			if got, want := errors.As(err, &inc), tt.lost != nil; got != want {
				t.Fatalf("bounce: %v: inconclusive %t, want %t", err, got, want)
			}
			if tt.lost == nil {
				return
			}
			var lost *bounceLostError
			if !errors.As(err, &lost) {
				t.Fatalf("bounce: %v, want a *bounceLostError", err)
			}
			if *lost != *tt.lost {
				t.Errorf("bounce: got %+v, want %+v", *lost, *tt.lost)
			}
		})
	}
}

// TestAKfakePortTakenByAnotherProcessIsInconclusive: when another process
// holds the port the harness chose for kfake (a run's --listen on port 0
// given it while the cluster was down for a bounce), starting the cluster
// fails as an inconclusive scenario, not as a broken invariant.
func TestAKfakePortTakenByAnotherProcessIsInconclusive(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	k := &kafkaInput{dir: t.TempDir(), port: l.Addr().(*net.TCPAddr).Port, topic: "t", partitions: 1}
	err = k.start(true)
	if err == nil {
		k.close()
		t.Fatal("kfake started on a port another listener holds")
	}
	var inc inconclusiveError
	if !errors.As(err, &inc) {
		t.Fatalf("got %v, want an inconclusive error", err)
	}
}
