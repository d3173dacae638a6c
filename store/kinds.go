package store

import (
	"fmt"
	"maps"
	"slices"
	"strings"
)

// CountKinds summarises problems by kind, sorted by name: "2 orphan, 1
// unfinished" ("" for none). verify and crashtest print it.
func CountKinds(ps []Problem) string {
	n := map[string]int{}
	for _, p := range ps {
		n[string(p.Kind)]++
	}
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(n)) {
		parts = append(parts, fmt.Sprintf("%d %s", n[k], k))
	}
	return strings.Join(parts, ", ")
}
