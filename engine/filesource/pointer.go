package filesource

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"math/bits"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync/atomic"
	"unsafe"

	"github.com/edsrzf/mmap-go"

	"github.com/blackbox-audit/blackbox/internal/killpoint"
)

// The pointer file's layout, which the package documentation states as
// its format for tools that read pointer files.
const (
	// PointerSize is the size of a pointer file, in bytes.
	PointerSize = 1024
	// Layout is the layout version this package writes at byte 24: the
	// Pointer.Layout of a file ReadPointer accepts.
	Layout = 1
	// FingerprintMax is how many leading bytes of the input the fingerprint
	// covers at most: the bound of Pointer.FingerprintLen.
	FingerprintMax = 4096

	headerSize = 48
	// offPending is where the pending header is (bytes 64 to 112, laid
	// out as the header): the header, at offset 0, of a file a run reads
	// from 0 under a new epoch after a loss while the header still
	// describes the file lost from, until the first commit moves the header
	// there (see Source.startPointer); a restart that finds that file
	// again reads it under the same epoch. Written with the header
	// (pointerFile.store), cleared by every write of a header alone.
	offPending = 64
	offOffset  = 0
	offEpoch   = 8
	offID      = 16
	offLayout  = 24
	offFPLen   = 32
	offFP      = 40
)

// Pointer is the content of a pointer file: the committed byte offset, the
// epoch of the position space, the input file's identity hash, the layout
// version and the fingerprint of the input's first FingerprintLen bytes. A
// Pointer is a value: safe to copy and share.
type Pointer struct {
	Offset         int64
	Epoch          int64
	Identity       uint64
	Layout         int64
	FingerprintLen int64
	Fingerprint    uint64
}

func (p Pointer) encode() []byte {
	b := make([]byte, PointerSize)
	p.put(b)
	return b
}

// encodeFile is a pointer file's bytes: header h, and pending (when its
// epoch is not 0) at offPending.
func encodeFile(h, pending Pointer) []byte {
	b := h.encode()
	if pending.Epoch != 0 {
		pending.Layout = Layout
		pending.put(b[offPending:])
	}
	return b
}

// put writes p's fields into b (at least headerSize bytes).
func (p Pointer) put(b []byte) {
	binary.LittleEndian.PutUint64(b[offOffset:], uint64(p.Offset))
	binary.LittleEndian.PutUint64(b[offEpoch:], uint64(p.Epoch))
	binary.LittleEndian.PutUint64(b[offID:], p.Identity)
	binary.LittleEndian.PutUint64(b[offLayout:], uint64(p.Layout))
	binary.LittleEndian.PutUint64(b[offFPLen:], uint64(p.FingerprintLen))
	binary.LittleEndian.PutUint64(b[offFP:], p.Fingerprint)
}

// decodePointer decodes a header from b, zero-padded to headerSize.
func decodePointer(b []byte) Pointer {
	var h [headerSize]byte
	copy(h[:], b)
	return Pointer{
		Offset:         int64(binary.LittleEndian.Uint64(h[offOffset:])),
		Epoch:          int64(binary.LittleEndian.Uint64(h[offEpoch:])),
		Identity:       binary.LittleEndian.Uint64(h[offID:]),
		Layout:         int64(binary.LittleEndian.Uint64(h[offLayout:])),
		FingerprintLen: int64(binary.LittleEndian.Uint64(h[offFPLen:])),
		Fingerprint:    binary.LittleEndian.Uint64(h[offFP:]),
	}
}

// ReadPointer reads the pointer file at path (for tools and tests; a
// running source keeps it mapped). A file that does not hold a complete
// header of layout 1 gives the fields it holds and an error wrapping
// ErrPointerLayout.
func ReadPointer(path string) (Pointer, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return Pointer{}, fileErr("read pointer", path, err)
	}
	p := decodePointer(b)
	if len(b) < headerSize || p.Layout != Layout {
		return p, fileErr("read pointer", path, fmt.Errorf("%w: %d bytes, layout %d", ErrPointerLayout, len(b), p.Layout))
	}
	return p, nil
}

// newEpoch returns a random positive epoch (never 0).
func newEpoch() int64 {
	for {
		if e := rand.Int64(); e > 0 {
			return e
		}
	}
}

// fingerprintOf is the FNV-1a 64 hash of b.
func fingerprintOf(b []byte) uint64 {
	h := fnv.New64a()
	h.Write(b)
	return h.Sum64()
}

// pointerTrust is what a pointer file read at start can be trusted with.
type pointerTrust int

const (
	trustNothing    pointerTrust = iota // created, empty, short, unknown: from 0, new epoch
	trustOffsetOnly                     // layout 0: an offset, nothing else
	trustAll                            // a complete header of our layout
)

// loadPointer reads the pointer file at path and says what it can be
// trusted with, warning through logf about anything it cannot use, and
// returns the pending header it holds (pendingOf) with a header it trusts.
func loadPointer(path string, logf func(string, ...any)) (Pointer, pointerTrust, Pointer, error) {
	b, err := os.ReadFile(path)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return Pointer{}, trustNothing, Pointer{}, nil
	case err != nil:
		return Pointer{}, trustNothing, Pointer{}, fileErr("read pointer", path, err)
	}
	p, trust := trustPointer(b, path, logf)
	var pending Pointer
	if trust == trustAll {
		pending = pendingOf(b)
	}
	return p, trust, pending, nil
}

// pendingOf is the pending header b (a pointer file's bytes) holds, the
// zero Pointer when none (or one that is not a valid header of our
// layout).
func pendingOf(b []byte) Pointer {
	if len(b) < offPending+headerSize {
		return Pointer{}
	}
	q := decodePointer(b[offPending:])
	if q.Layout != Layout || q.Epoch <= 0 || q.Offset != 0 || q.FingerprintLen < 0 || q.FingerprintLen > FingerprintMax {
		return Pointer{}
	}
	return q
}

// trustPointer decodes the bytes b of the pointer file at path: what it
// holds and what it can be trusted with.
func trustPointer(b []byte, path string, logf func(string, ...any)) (Pointer, pointerTrust) {
	if len(b) > PointerSize {
		b = b[:PointerSize]
	}
	switch {
	case len(b) == 0:
		logf("pointer file %s is empty: reading from 0 under a new epoch", path)
		return Pointer{}, trustNothing
	case len(b) < 8:
		logf("pointer file %s is too short for an offset (%d bytes): reading from 0 under a new epoch; it is rewritten at %d bytes", path, len(b), PointerSize)
		return Pointer{}, trustNothing
	}
	p := decodePointer(b)
	short := len(b) < PointerSize
	switch p.Layout {
	case 0:
		if p.Offset < 0 {
			logf("pointer file %s holds a negative offset %d: reading from 0 under a new epoch", path, p.Offset)
			return Pointer{}, trustNothing
		}
		logf("pointer file %s has no layout version (%d bytes): taking its offset %d as a byte offset under a new epoch", path, len(b), p.Offset)
		return Pointer{Offset: p.Offset}, trustOffsetOnly
	case Layout:
		if len(b) < headerSize {
			logf("pointer file %s holds %d bytes of its %d-byte header: reading from 0 under a new epoch", path, len(b), headerSize)
			return Pointer{}, trustNothing
		}
		if p.Offset < 0 || p.Epoch == 0 || p.FingerprintLen < 0 || p.FingerprintLen > FingerprintMax {
			logf("pointer file %s is corrupt (offset %d, epoch %d, fingerprint length %d): reading from 0 under a new epoch", path, p.Offset, p.Epoch, p.FingerprintLen)
			return Pointer{}, trustNothing
		}
		if short {
			logf("pointer file %s is %d bytes, not %d: its header is kept and the file rewritten at %d bytes", path, len(b), PointerSize, PointerSize)
		}
		return p, trustAll
	default:
		logf("pointer file %s has an unknown layout %d: reading from 0 under a new epoch", path, p.Layout)
		return Pointer{}, trustNothing
	}
}

var bigEndianHost = func() bool {
	var b [2]byte
	binary.NativeEndian.PutUint16(b[:], 1)
	return b[0] == 0
}()

// pointerFile is the memory-mapped pointer file. It is used by one goroutine
// at a time (the Source serialises it under its mutex).
//
// While a source runs, lock is an open descriptor of the file the path
// names, holding an exclusive flock: a second run on the same pointer is
// refused (ErrLocked). A write replaces the file by a rename, so the new
// file is locked before it is renamed into place, then the old one's lock
// is released: the file at the path is always locked.
type pointerFile struct {
	path string
	f    *os.File
	m    mmap.MMap
	hdr  Pointer  // what the file holds
	lock *os.File // the flock's descriptor, nil when not held

	// for tests: called before each write with what the file will hold
	hookWrite func(Pointer)
}

// acquire locks the pointer file, creating it empty if it does not exist
// (created says so). It fails at once with an error wrapping ErrLocked
// when another run holds the lock.
func (p *pointerFile) acquire(create bool) (created bool, err error) {
	if p.lock != nil {
		return false, nil
	}
	for range 100 { // the file at the path was replaced after our open: again
		var f *os.File
		err := os.ErrExist
		if create {
			f, err = os.OpenFile(p.path, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o644)
			created = err == nil
		}
		if errors.Is(err, os.ErrExist) {
			f, err = os.OpenFile(p.path, os.O_RDWR, 0)
		}
		if err != nil {
			return false, fileErr("lock pointer", p.path, err)
		}
		if err := lockFile(f); err != nil {
			f.Close()
			return false, fileErr("lock pointer", p.path, err)
		}
		fi, err := f.Stat()
		if err != nil {
			f.Close()
			return false, fileErr("lock pointer", p.path, err)
		}
		if at, err := os.Stat(p.path); err == nil && os.SameFile(fi, at) {
			p.lock = f
			return created, nil
		}
		f.Close()
	}
	return false, fileErr("lock pointer", p.path, errors.New("the file keeps being replaced"))
}

// release releases the lock.
func (p *pointerFile) release() {
	if p.lock != nil {
		p.lock.Close()
		p.lock = nil
	}
}

func (p *pointerFile) mapped() bool { return p.m != nil }

// open maps the pointer file (which must be PointerSize bytes).
func (p *pointerFile) open() error {
	if p.m != nil {
		return nil
	}
	f, err := os.OpenFile(p.path, os.O_RDWR, 0)
	if err != nil {
		return fileErr("open pointer", p.path, err)
	}
	fi, err := f.Stat()
	if err == nil && fi.Size() != PointerSize {
		err = fmt.Errorf("%w: %d bytes, not %d", ErrPointerLayout, fi.Size(), PointerSize)
	}
	var m mmap.MMap
	if err == nil {
		m, err = mmap.MapRegion(f, PointerSize, mmap.RDWR, 0, 0)
	}
	if err != nil {
		f.Close()
		return fileErr("map pointer", p.path, err)
	}
	p.f, p.m = f, m
	return nil
}

// close unmaps and closes the pointer file.
func (p *pointerFile) close() error {
	if p.m == nil {
		return nil
	}
	err := p.m.Unmap()
	if cerr := p.f.Close(); err == nil {
		err = cerr
	}
	p.f, p.m = nil, nil
	return fileErr("unmap pointer", p.path, err)
}

// setOffset commits off: one aligned 8-byte store into the shared mapping,
// then a Flush (msync). If the file is not mapped (the source stopped), it
// is mapped for this write and unmapped after.
func (p *pointerFile) setOffset(off int64) error {
	if p.hookWrite != nil {
		h := p.hdr
		h.Offset = off
		p.hookWrite(h)
	}
	if !p.mapped() {
		if p.lock == nil { // no run holds it: lock it for this write
			if _, err := p.acquire(false); err != nil {
				return err
			}
			defer p.release()
		}
		if err := p.open(); err != nil {
			return err
		}
		defer p.close()
	}
	u := uint64(off)
	if bigEndianHost {
		u = bits.ReverseBytes64(u)
	}
	atomic.StoreUint64((*uint64)(unsafe.Pointer(&p.m[offOffset])), u)
	killpoint.ReachAt(killpoint.PointerWritten, off) // tests only: dormant unless armed
	if err := p.m.Flush(); err != nil {
		return fileErr("flush pointer", p.path, err)
	}
	p.hdr.Offset = off
	return nil
}

// store replaces the whole file at once, header h and pending header
// pending (none when its epoch is 0): a temporary file, synced and renamed
// over the pointer file, then the directory synced; the mapping (if any)
// is moved to the new file, and a file a run holds (locked) is mapped. A
// crash leaves the old or the new file, never a mix.
func (p *pointerFile) store(h, pending Pointer) error {
	h.Layout = Layout
	if p.hookWrite != nil {
		p.hookWrite(h)
	}
	held := p.lock != nil
	if !held { // no run holds it (a commit after Run returned)
		if _, err := p.acquire(false); err != nil {
			return err
		}
		defer p.release()
	}
	tmp := p.path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return fileErr("write pointer", tmp, err)
	}
	_, err = f.Write(encodeFile(h, pending))
	if err == nil {
		err = f.Sync()
	}
	if err == nil {
		err = lockFile(f) // locked before it is at the path
	}
	if err == nil {
		err = p.close()
	}
	if err == nil {
		err = os.Rename(tmp, p.path)
	}
	if err != nil {
		f.Close()
		os.Remove(tmp)
		return fileErr("write pointer", p.path, err)
	}
	p.lock.Close() // the old file's lock: the new file holds ours
	p.lock = f
	if d, err := os.Open(filepath.Dir(p.path)); err == nil {
		d.Sync() // best effort: makes the rename durable across a power loss
		d.Close()
	}
	p.hdr = h
	if held {
		return p.open()
	}
	return nil
}
