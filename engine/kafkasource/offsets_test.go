package kafkasource

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
)

// TestAPartitionNoMemberIsAssignedIsSettledOnlyWhenTheGroupCommittedItToItsEnd:
// what unassignedLeft (a partition no member is assigned) and othersLeft
// (one another member owns, with Drain) say of a partition, from the
// group's commit (its metadata naming the topic ID the metadata gave
// before and after the offsets were read), its start and its end offset:
// only a commit of this incarnation at the end leaves nothing; a commit
// unknown, below or past the end, of another incarnation or of none is
// behind unless the partition never held a record.
func TestAPartitionNoMemberIsAssignedIsSettledOnlyWhenTheGroupCommittedItToItsEnd(t *testing.T) {
	const tp = "t"
	id := topicID{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}
	other := topicID{9}
	tag := commitTag(id)
	type commit struct {
		at   int64
		meta string
		err  error
	}
	tests := []struct {
		name       string
		before     topicID
		after      *topicID // nil: the same as before
		commit     *commit  // nil: none
		start, end int64
		endErr     error
		noEnd      bool
		unassigned string
		others     string
	}{
		{name: "committed to its end", before: id, commit: &commit{at: 10, meta: tag}, end: 10},
		{name: "committed to its end with groups' progress", before: id, commit: &commit{at: 10, meta: tag + groupsTag + "fast=12"}, end: 10},
		{name: "committed below its end", before: id, commit: &commit{at: 4, meta: tag}, end: 10,
			unassigned: "t/0 (6 records not committed)", others: "t/0: 6 records"},
		{name: "committed past its end", before: id, commit: &commit{at: 12, meta: tag}, end: 10,
			unassigned: "t/0 (the group's commit 12 past the log end 10)"},
		{name: "no commit, never a record", before: id, end: 0},
		{name: "no commit, records", before: id, end: 3, unassigned: "t/0 (3 records, no commit)", others: "t/0: 3 records"},
		{name: "no commit, records deleted", before: id, start: 3, end: 3, unassigned: "t/0 (3 records, no commit)"},
		{name: "commit below the log start", before: id, commit: &commit{at: 1, meta: tag}, start: 5, end: 5,
			unassigned: "t/0 (4 records not committed)"},
		{name: "commit of another incarnation at the end", before: id, commit: &commit{at: 10, meta: commitTag(other)}, end: 10,
			unassigned: "t/0 (10 records, the group's commit of another incarnation of the topic)", others: "t/0: 10 records"},
		{name: "commit of another incarnation, never a record", before: id, commit: &commit{at: 10, meta: commitTag(other)}, end: 0},
		{name: "commit naming no topic ID at the end", before: id, commit: &commit{at: 10}, end: 10,
			unassigned: "t/0 (the group's commit 10 names no topic ID: not known to be of this incarnation)"},
		{name: "commit naming no topic ID, a cluster without topic IDs", commit: &commit{at: 10}, end: 10},
		{name: "commit not known", before: id, commit: &commit{err: kerr.GroupAuthorizationFailed}, end: 10,
			unassigned: "t/0 (the group's commit not known: " + kerr.GroupAuthorizationFailed.Error() + ")",
			others:     "t/0: the group's commit not known: " + kerr.GroupAuthorizationFailed.Error()},
		{name: "end not known", before: id, commit: &commit{at: 10, meta: tag}, end: 10, endErr: kerr.NotLeaderForPartition,
			unassigned: "t/0 (end offset not known: " + kerr.NotLeaderForPartition.Error() + ")",
			others:     "t/0: end offset not known: " + kerr.NotLeaderForPartition.Error()},
		{name: "end not listed", before: id, commit: &commit{at: 10, meta: tag}, noEnd: true,
			unassigned: "t/0 (end offset not known)", others: "t/0: end offset not known"},
		{name: "topic created again while read", before: id, after: &other, commit: &commit{at: 10, meta: tag}, end: 10,
			unassigned: "t/0 (its topic deleted or created again while read)", others: "t/0: its topic deleted or created again while read"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			after := tt.before
			if tt.after != nil {
				after = *tt.after
			}
			o := groupOffsets{
				commits: kadm.OffsetResponses{},
				starts:  kadm.ListedOffsets{tp: {0: {Topic: tp, Offset: tt.start}}},
				ends:    kadm.ListedOffsets{},
				before:  map[string]topicID{tp: tt.before},
				after:   map[string]topicID{tp: after},
			}
			if c := tt.commit; c != nil {
				o.commits[tp] = map[int32]kadm.OffsetResponse{0: {Offset: kadm.Offset{Topic: tp, At: c.at, Metadata: c.meta}, Err: c.err}}
			}
			if !tt.noEnd {
				o.ends[tp] = map[int32]kadm.ListedOffset{0: {Topic: tp, Offset: tt.end, Err: tt.endErr}}
			}
			p := topicPartition{tp, 0}
			if got := o.unassignedLeft(p); got != tt.unassigned {
				t.Errorf("unassignedLeft = %q, want %q", got, tt.unassigned)
			}
			if got := o.othersLeft(p); got != tt.others {
				t.Errorf("othersLeft = %q, want %q", got, tt.others)
			}
		})
	}
}
