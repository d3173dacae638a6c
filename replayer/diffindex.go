package replayer

import (
	"encoding/json"
	"fmt"
	"hash/maphash"

	"github.com/blackbox-audit/blackbox/store"
)

// sideAgg is what one side did with an input: its deliveries and hashes of
// its payload and their outputs.
type sideAgg struct {
	n, nonEmpty int32
	run, rerun  int32  // runs of the first and second delivery
	last        int32  // run of the last delivery
	reprun      int32  // run of the first delivery its runs do not explain
	repnth      int32  // that delivery's number (0: the first)
	in          uint64 // hash of the first delivery's input payload
	first       uint64 // hash of the first delivery with outputs
	concat      uint64 // hash of every delivery's outputs, in order
	cut         int32  // deliveries whose outputs were cut (delivery.cut)
	ord         int64  // the side's ordinal of the input's first delivery
	tord        int64  // a timer's ordinal among the side's timers (delivery.tord)
	seq, epoch  int64  // the first delivery's
	reseq       int64  // the second delivery's
	repseq      int64  // the repeated delivery's (reprun)
	covers      int32  // runs of its deliveries that committed it (sideRuns.covers)
	lastCov     bool   // the run of the last delivery committed it
	mixed       bool   // deliveries with outputs differ
}

// hashInit starts a combination of hashes with mix.
const hashInit = 0

// mixSeed seeds mix; like the differ's seed, it lives for the process
// only: no combined hash is stored.
var mixSeed = maphash.MakeSeed()

// mix combines the hash h of a sequence with the hash x of its next
// element (order matters).
func mix(h, x uint64) uint64 { return maphash.Comparable(mixSeed, [2]uint64{h, x}) }

// effective is the hash of the side's outputs of the input as Diff
// compares them (effectiveOutputs): 0 when no delivery had outputs, else
// its first delivery's with outputs, or every delivery's in order when
// they differ.
func (s *sideAgg) effective() uint64 {
	switch {
	case s.nonEmpty == 0:
		return 0
	case s.mixed:
		return s.concat
	}
	return s.first
}

// agg is what both sides did with an input.
type agg struct{ a, b sideAgg }

// side is side si's (0: A, 1: B).
func (g *agg) side(si int) *sideAgg {
	if si == 0 {
		return &g.a
	}
	return &g.b
}

// hashOutput hashes an output after decoding and canonical re-encoding.
func (d *differ) hashOutput(o output) uint64 {
	var mh maphash.Hash
	mh.SetSeed(d.seed)
	mh.WriteString(o.sink)
	mh.WriteByte(0)
	v, err := d.codec.Decode(o.payload)
	if err != nil {
		mh.WriteByte(1)
		mh.Write(o.payload)
		return mh.Sum64()
	}
	d.canon.Reset()
	enc := json.NewEncoder(&d.canon)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(strip(v, d.ignore)); err != nil {
		mh.WriteByte(2)
		fmt.Fprintf(&mh, "%#v", v)
		return mh.Sum64()
	}
	mh.Write(d.canon.Bytes())
	return mh.Sum64()
}

// add counts a delivery whose input payload hashes to in and whose outputs
// hash to h (xs: each output's hash). sr says what the side's runs were
// (killed, committed, concurrent): a delivery they do not explain
// (sideRuns.explained) makes the input repeated. A cut delivery (its
// outputs not known) counts as a delivery, not its outputs.
func (s *sideAgg) add(dl *delivery, in, h uint64, xs []uint64, ord int64, sr *sideRuns) {
	cov, known := sr.covers(dl)
	s.n++
	switch s.n {
	case 1:
		s.ord, s.run, s.seq, s.epoch, s.in, s.tord = ord, int32(dl.run), dl.seq, dl.epoch, in, dl.tord
		s.concat = hashInit
	case 2:
		s.rerun, s.reseq = int32(dl.run), dl.seq
	}
	if s.n > 1 && s.reprun == 0 && !sr.explained(s, dl, cov, known) {
		s.reprun, s.repseq, s.repnth = int32(dl.run), dl.seq, s.n-1
	}
	if s.n == 1 || s.last != int32(dl.run) {
		if cov {
			s.covers++
		}
		s.lastCov = cov
	}
	s.last = int32(dl.run)
	if dl.cut {
		s.cut++
		return
	}
	if len(xs) == 0 {
		return
	}
	s.nonEmpty++
	if s.nonEmpty == 1 {
		s.first = h
	} else if h != s.first {
		s.mixed = true
	}
	for _, x := range xs {
		s.concat = mix(s.concat, x)
	}
}

// unknown reports whether the side's outputs of the input are not known:
// every delivery of it was cut.
func (s *sideAgg) unknown() bool { return s.n > 0 && s.cut == s.n }

// inputHash hashes an input's payload: the row's, or its journal row's for
// an INDEXED input. Timers all hash alike (the walk keys them by their
// outputs; those left over align in order); an input
// whose payload cannot be read hashes like no other.
func (d *differ) inputHash(r store.Reader, dl *delivery) uint64 {
	var mh maphash.Hash
	mh.SetSeed(d.seed)
	switch dl.kind {
	case store.KindTimer:
		mh.WriteString("timer")
	case store.KindIndexed:
		j, err := r.Journal(dl.src, dl.seq)
		if err != nil {
			d.unreadable++
			fmt.Fprintf(&mh, "unreadable %d", d.unreadable)
			break
		}
		mh.WriteByte(0)
		mh.Write(j.Payload)
	default:
		mh.WriteByte(0)
		mh.Write(dl.payload)
	}
	return mh.Sum64()
}
