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
	"slices"
	"sync/atomic"
	"unsafe"

	"github.com/edsrzf/mmap-go"

	"github.com/blackbox-audit/blackbox/core"
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

	// GroupsLayout is the layout version of the group progress region
	// this package writes at byte 128 (0 in a file written before it:
	// no group's progress is kept there).
	GroupsLayout = 1
	// GroupSlots is how many groups' progress the region holds, and
	// GroupNameMax the longest group name it holds, in bytes: a group
	// past either keeps no progress of its own (a restart re-delivers it
	// what the slowest group had not completed).
	GroupSlots   = 13
	GroupNameMax = 32

	// The group progress region (see the package documentation): its
	// layout version at offGroups, then GroupSlots slots of slotSize
	// bytes from offSlots, each [0] check, [8] epoch, [16] offset, [24]
	// name length, [32] name.
	offGroups = 128
	offSlots  = 136
	slotSize  = 64

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

// Position is the committed offset as the engine's position type: the
// position of the last line every group processed, in the position space
// p.Epoch (a file's Key is ""). With p.Epoch it is what a state saved
// through that line holds: d.AlreadyApplied(p.Epoch, p.Position()).
func (p Pointer) Position() core.Position { return core.Position{Offset: p.Offset} }

func (p Pointer) encode() []byte {
	b := make([]byte, PointerSize)
	p.put(b)
	return b
}

// encodeFile is a pointer file's bytes: header h, pending (when its
// epoch is not 0) at offPending, and the group progress region holding
// groups (at most GroupSlots, each of h's epoch).
func encodeFile(h, pending Pointer, groups []GroupProgress) []byte {
	b := h.encode()
	if pending.Epoch != 0 {
		pending.Layout = Layout
		pending.put(b[offPending:])
	}
	binary.LittleEndian.PutUint64(b[offGroups:], GroupsLayout)
	for i, g := range groups[:min(len(groups), GroupSlots)] {
		putSlot(b[offSlots+i*slotSize:][:slotSize], g)
	}
	return b
}

// GroupProgress is one group's own progress in a pointer file: the group
// completed every line of the position space Epoch up to Offset (the
// offset after its last line). A value.
type GroupProgress struct {
	Group  string
	Epoch  int64
	Offset int64
}

// Position is the group's progress as the engine's position type: the
// position of the last line of its completed prefix, in the position space
// g.Epoch (a file's Key is ""), as engine.Intake.SkipCompleted takes it.
func (g GroupProgress) Position() core.Position { return core.Position{Offset: g.Offset} }

// putSlot writes g into slot (slotSize bytes), its check last.
func putSlot(slot []byte, g GroupProgress) {
	binary.LittleEndian.PutUint64(slot[8:], uint64(g.Epoch))
	binary.LittleEndian.PutUint64(slot[16:], uint64(g.Offset))
	binary.LittleEndian.PutUint64(slot[24:], uint64(len(g.Group)))
	clear(slot[32:])
	copy(slot[32:], g.Group)
	binary.LittleEndian.PutUint64(slot, slotCheck(slot))
}

// slotCheck is the check of a slot: FNV-1a 64 of its bytes after the
// check. A slot written in part (a crash between its stores, a torn
// page) fails it, and is not read.
func slotCheck(slot []byte) uint64 { return fingerprintOf(slot[8:slotSize]) }

// slotOf decodes a slot, reporting whether it holds a group's progress:
// its check holds, a name of 1 to GroupNameMax bytes, an epoch and a
// positive offset.
func slotOf(slot []byte) (GroupProgress, bool) {
	n := binary.LittleEndian.Uint64(slot[24:])
	g := GroupProgress{Epoch: int64(binary.LittleEndian.Uint64(slot[8:])), Offset: int64(binary.LittleEndian.Uint64(slot[16:]))}
	if binary.LittleEndian.Uint64(slot) != slotCheck(slot) || n == 0 || n > GroupNameMax || g.Epoch == 0 || g.Offset <= 0 {
		return GroupProgress{}, false
	}
	g.Group = string(slot[32 : 32+n])
	return g, true
}

// slotsOf is the group progress slots of a pointer file's bytes b hold,
// slot by slot: none when the region is missing or of another layout; a
// slot that fails its check, or names a group an earlier slot names, is
// left free (zero).
func slotsOf(b []byte) [GroupSlots]GroupProgress {
	var out [GroupSlots]GroupProgress
	if len(b) < PointerSize || binary.LittleEndian.Uint64(b[offGroups:]) != GroupsLayout {
		return out
	}
	for i := range GroupSlots {
		g, ok := slotOf(b[offSlots+i*slotSize:][:slotSize])
		if ok && !slices.ContainsFunc(out[:i], func(o GroupProgress) bool { return o.Group == g.Group }) {
			out[i] = g
		}
	}
	return out
}

// groupsOf is the progress slots hold, in slot order.
func groupsOf(slots [GroupSlots]GroupProgress) []GroupProgress {
	var out []GroupProgress
	for _, g := range slots {
		if g.Group != "" {
			out = append(out, g)
		}
	}
	return out
}

// ReadGroupProgress reads the group progress the pointer file at path
// holds (for tools and tests), each group's as written, whatever the
// header's epoch: a group's progress counts only in the header's epoch
// past its offset.
func ReadGroupProgress(path string) ([]GroupProgress, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fileErr("read pointer", path, err)
	}
	return groupsOf(slotsOf(b)), nil
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
// The group progress slots it returns are those of a header it trusts.
func loadPointer(path string, logf func(string, ...any)) (Pointer, pointerTrust, Pointer, [GroupSlots]GroupProgress, error) {
	var slots [GroupSlots]GroupProgress
	b, err := os.ReadFile(path)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return Pointer{}, trustNothing, Pointer{}, slots, nil
	case err != nil:
		return Pointer{}, trustNothing, Pointer{}, slots, fileErr("read pointer", path, err)
	}
	p, trust := trustPointer(b, path, logf)
	var pending Pointer
	if trust == trustAll {
		pending = pendingOf(b)
		slots = slotsOf(b)
	}
	return p, trust, pending, slots, nil
}

// ahead is the progress of groups that counts with header h: of h's epoch,
// past h's offset.
func ahead(groups []GroupProgress, h Pointer) []GroupProgress {
	var out []GroupProgress
	for _, g := range groups {
		if g.Epoch == h.Epoch && g.Offset > h.Offset {
			out = append(out, g)
		}
	}
	return out
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
	// groups is the group progress the file holds that counts (ahead of
	// hdr), slot by slot (a zero GroupProgress: a free slot).
	groups [GroupSlots]GroupProgress
	// region: the file holds the group progress region (this run wrote
	// its header, or a group's slot).
	region bool

	// for tests: called before each write with what the file will hold;
	// hookGroup after each store of a group's slot but its check (w: the
	// word's offset in the slot)
	hookWrite func(Pointer)
	hookGroup func(g GroupProgress, w int)
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
	return p.storeGroups(h, pending, ahead(groupsOf(p.groups), h))
}

// storeGroups is store with the group progress groups (each of h's epoch,
// past its offset; at most GroupSlots are written) in place of what the
// file holds.
func (p *pointerFile) storeGroups(h, pending Pointer, groups []GroupProgress) error {
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
	_, err = f.Write(encodeFile(h, pending, groups))
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
	p.hdr, p.region = h, true
	p.groups = [GroupSlots]GroupProgress{}
	copy(p.groups[:], groups)
	if held {
		return p.open()
	}
	return nil
}

// setGroups writes the progress of groups (each of the header's epoch,
// past its offset) into the mapped file's slots, in place: each group's
// slot, or a free one (none left: not written, reported in full), with
// aligned 8-byte stores, its check last. A kill between two stores leaves
// a slot that fails its check, read as no progress (the group's lines are
// delivered again), never a slot that claims more than its group
// completed. The stores are flushed (msync) by the caller's next flush of
// the mapping (stored: not flushed yet); a file not mapped (a commit
// after Run returned) is mapped for this write, flushed and unmapped.
func (p *pointerFile) setGroups(groups []GroupProgress) (full []string, stored bool, err error) {
	if !p.mapped() {
		if p.lock == nil {
			if _, err := p.acquire(false); err != nil {
				return nil, false, err
			}
			defer p.release()
		}
		if err := p.open(); err != nil {
			return nil, false, err
		}
		defer p.close()
		defer func() {
			if err == nil {
				err = p.flush()
			}
			stored = false
		}()
	}
	store64(p.m[offGroups:], GroupsLayout)
	p.region = true
	for _, g := range groups {
		i := p.slotFor(g.Group)
		if i < 0 {
			full = append(full, g.Group)
			continue
		}
		var slot [slotSize]byte
		putSlot(slot[:], g)
		at := p.m[offSlots+i*slotSize:][:slotSize]
		for w := 8; w < slotSize; w += 8 {
			store64(at[w:], binary.LittleEndian.Uint64(slot[w:]))
			if p.hookGroup != nil {
				p.hookGroup(g, w)
			}
		}
		store64(at, binary.LittleEndian.Uint64(slot[:]))
		p.groups[i] = g
		killpoint.ReachAt(killpoint.GroupProgressWritten, g.Offset) // tests only: dormant unless armed
	}
	return full, true, nil
}

// flush flushes the mapping (msync), if mapped.
func (p *pointerFile) flush() error {
	if !p.mapped() {
		return nil
	}
	if err := p.m.Flush(); err != nil {
		return fileErr("flush pointer", p.path, err)
	}
	return nil
}

// holds reports whether the file holds g's progress, or more of its
// epoch: a group's progress in an epoch only grows (a restart's lines the
// group completed before are told again as they are published, the
// progress read at the start stays until they pass it).
func (p *pointerFile) holds(g GroupProgress) bool {
	for _, h := range p.groups {
		if h.Group == g.Group && h.Epoch == g.Epoch && h.Offset >= g.Offset {
			return true
		}
	}
	return false
}

// slotFor is the slot a group's progress goes to: its own, else a free
// one (never written, or whose progress no longer counts: of another
// epoch, or not past the header's offset), else -1.
func (p *pointerFile) slotFor(group string) int {
	free := -1
	for i, g := range p.groups {
		switch {
		case g.Group == group:
			return i
		case free < 0 && (g.Group == "" || g.Epoch != p.hdr.Epoch || g.Offset <= p.hdr.Offset):
			free = i
		}
	}
	return free
}

// store64 stores v little-endian into the first 8 bytes of b (aligned, in
// the mapping) with one atomic store.
func store64(b []byte, v uint64) {
	if bigEndianHost {
		v = bits.ReverseBytes64(v)
	}
	atomic.StoreUint64((*uint64)(unsafe.Pointer(&b[0])), v)
}
