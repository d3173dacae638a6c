package kafkasource

import (
	"maps"
	"strings"
	"testing"
)

// TestACommitsMetadataCarriesTheGroupsProgress: what commitMeta writes,
// parseMeta reads back: the topic ID, and each group's progress (names
// escaped); a metadata too long for every group leaves the last ones out,
// named; an old tag (no groups) reads as no progress.
func TestACommitsMetadataCarriesTheGroupsProgress(t *testing.T) {
	id := topicID{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}
	long := strings.Repeat("x", maxMeta)
	tests := []struct {
		name   string
		groups map[string]int64
		want   map[string]int64
		left   []string
	}{
		{"none", nil, nil, nil},
		{"two", map[string]int64{"fast": 20, "a b,c=d": 7}, map[string]int64{"fast": 20, "a b,c=d": 7}, nil},
		{"one too long", map[string]int64{"fast": 20, long: 3}, map[string]int64{"fast": 20}, []string{long}},
		{"only one too long", map[string]int64{long: 3}, nil, []string{long}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			meta, left := commitMeta(id, tt.groups)
			if len(meta) > maxMeta {
				t.Fatalf("metadata of %d bytes, more than %d", len(meta), maxMeta)
			}
			gotID, got, ok := parseMeta(&meta)
			if !ok || gotID != id || !maps.Equal(got, tt.want) || len(left) != len(tt.left) || len(left) > 0 && left[0] != tt.left[0] {
				t.Fatalf("commitMeta(%v) = %q, left %v; read back %v %v %v, want %v, left %v", tt.groups, meta, left, gotID, got, ok, tt.want, tt.left)
			}
		})
	}
}

// FuzzCommitMeta: any metadata a broker returns reads without a panic; a
// group's progress read from it has a name and a positive offset, and
// only with a topic ID.
func FuzzCommitMeta(f *testing.F) {
	id := topicID{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}
	m, _ := commitMeta(id, map[string]int64{"fast": 20, "g%2": 3})
	f.Add(m)
	f.Add(commitTag(id))
	f.Add(commitTag(id) + groupsTag + "fast=0")
	f.Add(commitTag(id) + groupsTag + "=1,,x")
	f.Add("")
	f.Fuzz(func(t *testing.T, meta string) {
		gotID, groups, ok := parseMeta(&meta)
		if !ok && (gotID != topicID{} || groups != nil) {
			t.Fatalf("no tag, yet %v %v", gotID, groups)
		}
		for g, off := range groups {
			if g == "" || off <= 0 {
				t.Fatalf("progress %q=%d read from %q", g, off, meta)
			}
		}
	})
}
