package incident

import (
	"encoding/binary"
	"iter"
)

// inputLog is what Explain keeps of a run's inputs, in storage order: each
// input a few varints, its numbers stored as the difference from the
// input before (consecutive seqs, indexes and offsets cost a byte or two),
// its names as numbers into the explainer's tables. The outputs an input
// wrote are not stored when they are the count it declares (the usual
// case), nor the FAILED row of a completion when there is none: those few
// are kept aside by record number. So a run of a million inputs costs a
// dozen megabytes, not the 150 of a struct per input. The records fill
// chunks of chunkSize bytes, none across two, so that the log grows
// without copying what it holds. Not safe for concurrent use.
type inputLog struct {
	chunks [][]byte
	n      int           // records
	prev   inputRec      // the record last added, for the differences
	outs   map[int]int64 // record -> OUTPUT rows, when not its n
	failed map[int]int64 // record -> index of the FAILED row of its completion
	names  *names        // the explainer's
}

// names are the explainer's tables of feeds, processors, streams and keys:
// a name's number is its place in list. Not safe for concurrent use.
type names struct {
	list []string
	id   map[string]uint64
}

func (t *names) of(s string) uint64 {
	if id, ok := t.id[s]; ok {
		return id
	}
	id := uint64(len(t.list))
	t.list = append(t.list, s)
	t.id[s] = id
	return id
}

const (
	flagDelivery = 1 << iota
	flagIndexed
)

// chunkSize is the size of a chunk of the log, and maxRecord the most
// bytes a record takes (nine varints and the flags).
const (
	chunkSize = 1 << 16
	maxRecord = 9*binary.MaxVarintLen64 + 1
)

// add appends in (its outs and failed are set with setOuts and setFailed)
// and returns its record number.
func (l *inputLog) add(in inputRec) int {
	if len(l.chunks) == 0 || chunkSize-len(l.chunks[len(l.chunks)-1]) < maxRecord {
		l.chunks = append(l.chunks, make([]byte, 0, chunkSize))
	}
	b, p := l.chunks[len(l.chunks)-1], &l.prev
	b = binary.AppendVarint(b, in.seq-p.seq)
	b = binary.AppendVarint(b, in.index-p.index)
	b = binary.AppendVarint(b, in.n)
	b = binary.AppendUvarint(b, l.names.of(in.feed))
	b = binary.AppendUvarint(b, l.names.of(in.proc))
	b = binary.AppendUvarint(b, l.names.of(in.stream))
	var flags byte
	if in.delivery {
		flags |= flagDelivery
	}
	if in.indexed {
		flags |= flagIndexed
	}
	b = append(b, flags)
	if in.delivery {
		b = binary.AppendVarint(b, in.pos.Epoch-p.pos.Epoch)
		b = binary.AppendUvarint(b, l.names.of(in.pos.Key))
		b = binary.AppendVarint(b, in.pos.Offset-p.pos.Offset)
		p.pos = in.pos
	}
	l.chunks[len(l.chunks)-1] = b
	p.seq, p.index = in.seq, in.index
	l.n++
	return l.n - 1
}

// setOuts records that record i wrote outs OUTPUT rows.
func (l *inputLog) setOuts(i int, n, outs int64) {
	if outs == n {
		delete(l.outs, i)
		return
	}
	if l.outs == nil {
		l.outs = map[int]int64{}
	}
	l.outs[i] = outs
}

// setFailed records the FAILED row of record i's completion.
func (l *inputLog) setFailed(i int, index int64) {
	if l.failed == nil {
		l.failed = map[int]int64{}
	}
	l.failed[i] = index
}

// all yields the inputs in the order they were added.
func (l *inputLog) all() iter.Seq[inputRec] {
	return func(yield func(inputRec) bool) {
		var b []byte
		next := 0 // the chunk after b
		var p inputRec
		varint := func() int64 {
			v, k := binary.Varint(b)
			b = b[k:]
			return v
		}
		name := func() string {
			v, k := binary.Uvarint(b)
			b = b[k:]
			return l.names.list[v]
		}
		for i := range l.n {
			if len(b) == 0 {
				b, next = l.chunks[next], next+1
			}
			in := inputRec{pos: p.pos}
			in.seq = p.seq + varint()
			in.index = p.index + varint()
			in.n = varint()
			in.feed, in.proc, in.stream = name(), name(), name()
			flags := b[0]
			b = b[1:]
			in.delivery, in.indexed = flags&flagDelivery != 0, flags&flagIndexed != 0
			if in.delivery {
				in.pos.Epoch += varint()
				in.pos.Key = name()
				in.pos.Offset += varint()
			}
			p = in
			if !in.delivery {
				in.pos = Position{}
			}
			in.outs = in.n
			if o, ok := l.outs[i]; ok {
				in.outs = o
			}
			in.failed = l.failed[i]
			if !yield(in) {
				return
			}
		}
	}
}
