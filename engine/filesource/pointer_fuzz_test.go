package filesource

import (
	"os"
	"path/filepath"
	"testing"
)

// FuzzPointerFile: any bytes in a pointer file load without a panic, and a
// pointer loaded with any trust has an offset that is not negative and, when
// fully trusted, an epoch and a fingerprint length within its bounds; the
// group progress it holds (layout GroupsLayout) is of names of 1 to
// GroupNameMax bytes, each once, with an epoch and a positive offset, and
// only of a trusted header; every slot it holds is written again as it was
// read.
func FuzzPointerFile(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte{1, 2, 3})
	f.Add(Pointer{Offset: 42, Epoch: 7, Layout: Layout, FingerprintLen: 10}.encode())
	f.Add(make([]byte, PointerSize))
	f.Add(encodeFile(Pointer{Offset: 42, Epoch: 7, Layout: Layout}, Pointer{},
		[]GroupProgress{{Group: "fast", Epoch: 7, Offset: 420}, {Group: "g", Epoch: 7, Offset: 43}}))
	torn := encodeFile(Pointer{Offset: 42, Epoch: 7, Layout: Layout}, Pointer{}, []GroupProgress{{Group: "fast", Epoch: 7, Offset: 420}})
	torn[offSlots+16]++ // an offset stored, its check not
	f.Add(torn)
	f.Fuzz(func(t *testing.T, b []byte) {
		path := filepath.Join(t.TempDir(), "p.ptr")
		if err := os.WriteFile(path, b, 0o644); err != nil {
			t.Fatal(err)
		}
		p, trust, _, slots, err := loadPointer(path, func(string, ...any) {})
		if err != nil {
			t.Fatalf("a readable pointer file gave an error: %v", err)
		}
		if p.Offset < 0 {
			t.Fatalf("negative offset %d loaded (trust %d)", p.Offset, trust)
		}
		if trust == trustAll && (p.Epoch == 0 || p.FingerprintLen < 0 || p.FingerprintLen > FingerprintMax) {
			t.Fatalf("trusted a corrupt header %+v", p)
		}
		if trust == trustNothing && p != (Pointer{}) {
			t.Fatalf("untrusted pointer carries values %+v", p)
		}
		groups := groupsOf(slots)
		if trust != trustAll && len(groups) > 0 {
			t.Fatalf("group progress %+v loaded with an untrusted header", groups)
		}
		seen := map[string]bool{}
		for _, g := range groups {
			if len(g.Group) == 0 || len(g.Group) > GroupNameMax || g.Epoch == 0 || g.Offset <= 0 || seen[g.Group] {
				t.Fatalf("loaded a corrupt group progress %+v (of %+v)", g, groups)
			}
			seen[g.Group] = true
		}
		for i, g := range slots {
			if g.Group == "" {
				continue
			}
			var slot [slotSize]byte
			putSlot(slot[:], g)
			if got, ok := slotOf(slot[:]); !ok || got != g {
				t.Fatalf("slot %d %+v written again reads %+v, %v", i, g, got, ok)
			}
		}
	})
}
