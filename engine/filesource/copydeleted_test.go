package filesource

import (
	"os"
	"slices"
	"testing"
	"testing/synctest"
	"time"
)

// A restart whose pointer names the file at the path, read part way, finds
// a copy of it among the rotated siblings (copytruncate while stopped, or
// while the run was killed before it saw the truncation). The truncated
// file went on taking lines, and was then deleted and created again before
// the restart (the torture scenario of seed 1796200344417764196): its lines
// after the copy are gone, and whether there were any cannot be known. The
// restart reads the copy from the pointer to its end, then the new file,
// and counts the deleted file's bytes unread (LossUnread, lossless:false),
// whether the new file has another identity or the file system reused the
// inode (emulated: the pointer made to name the new file's identity; the new
// file was made after the pointer was last written, which the pointer's
// file cannot be). It used to read the copy and the new file and say
// lossless. The truncated file kept at the path is read after the copy,
// lossless.
func TestAFileDeletedAfterItsCopyWhileStoppedIsCountedUnread(t *testing.T) {
	for _, tc := range []struct {
		name     string
		deleted  bool // the truncated file deleted and the path created again
		reused   bool // its inode reused by the new file
		want     []string
		lossless bool
	}{
		{name: "kept", want: slices.Concat(linesOf("old", 0, 2), linesOf("after", 0, 2)), lossless: true},
		{name: "deleted, another inode", deleted: true, want: slices.Concat(linesOf("old", 0, 2), linesOf("new", 0, 2))},
		{name: "deleted, its inode reused", deleted: true, reused: true, want: slices.Concat(linesOf("old", 0, 2), linesOf("new", 0, 2))},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				path := input(t, "")
				writeFile(t, path, numbered("read", 0, 3))
				once(t, path, Options{}, 3)
				ptr := path + ".ptr"
				appendFile(t, path, numbered("old", 0, 2))
				copyTo(t, path, path+"-0001")
				if err := os.Truncate(path, 0); err != nil {
					t.Fatal(err)
				}
				appendFile(t, path, numbered("after", 0, 2))
				if tc.deleted {
					// Out of the rotated names: gone, as far as the source
					// can see (and its inode kept, so the new file has
					// another).
					if err := os.Rename(path, path+".gone"); err != nil {
						t.Fatal(err)
					}
					writeFile(t, path, numbered("new", 0, 2))
				}
				if tc.reused {
					p := readPointer(t, ptr)
					fi, err := os.Stat(path)
					if err != nil {
						t.Fatal(err)
					}
					p.Identity = identity(fi)
					if err := os.WriteFile(ptr, p.encode(), 0o644); err != nil {
						t.Fatal(err)
					}
					// Written before the new file was made, as by the run.
					writtenAt(t, ptr, mustMadeAt(t, path).Add(-time.Hour))
				}
				var lost losses
				p := &rec{}
				r := start(t, path, Options{}, setup{procs: []*rec{p}, observer: lost.observer()})
				st := r.settle(len(tc.want), p)
				r.stop()
				got, _ := p.got()
				if !slices.Equal(got, tc.want) {
					t.Fatalf("got %q\nwant %q\n%s", got, tc.want, r.log)
				}
				unread := int64(0)
				if !tc.lossless {
					unread = 1
				}
				if fs := st.Feeds[0]; st.Lossless != tc.lossless || fs.Losses[LossUnread] != unread || int64(len(lost.got())) != unread {
					t.Fatalf("lossless %v, unread %d, losses %+v: want lossless %v, unread %d\n%s", st.Lossless, fs.Losses[LossUnread], lost.got(), tc.lossless, unread, r.log)
				}
			})
		})
	}
}
