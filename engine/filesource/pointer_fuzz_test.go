package filesource

import (
	"os"
	"path/filepath"
	"testing"
)

// FuzzPointerFile: any bytes in a pointer file load without a panic, and a
// pointer loaded with any trust has an offset that is not negative and, when
// fully trusted, an epoch and a fingerprint length within its bounds.
func FuzzPointerFile(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte{1, 2, 3})
	f.Add(Pointer{Offset: 42, Epoch: 7, Layout: Layout, FingerprintLen: 10}.encode())
	f.Add(make([]byte, PointerSize))
	f.Fuzz(func(t *testing.T, b []byte) {
		path := filepath.Join(t.TempDir(), "p.ptr")
		if err := os.WriteFile(path, b, 0o644); err != nil {
			t.Fatal(err)
		}
		p, trust, _, err := loadPointer(path, func(string, ...any) {})
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
	})
}
