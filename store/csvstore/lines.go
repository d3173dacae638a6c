package csvstore

import (
	"bufio"
	"io"

	"github.com/blackbox-audit/blackbox/store"
)

// maxLine is the longest line a reader decodes, its '\n' included:
// store.MaxRowSize (64 MiB), the longest row a writer writes. A longer line
// is reported as malformed and skipped without being held in memory.
const maxLine = store.MaxRowSize

const readBuffer = 64 << 10

// lineReader splits a byte stream into physical lines ending in '\n'. Not
// safe for concurrent use.
type lineReader struct {
	br  *bufio.Reader
	acc []byte
	off int64 // offset just after the last complete line returned
	n   int64 // number of the last line returned, 1-based
}

// newLineReader reads r, which starts at offset off of the file, after
// line n; size bounds what r holds (-1: unknown), so that a small read
// does not cost a large buffer.
func newLineReader(r io.Reader, size, off, n int64) *lineReader {
	buf := int64(readBuffer)
	if size >= 0 && size < buf {
		buf = max(size, 16)
	}
	return &lineReader{br: bufio.NewReaderSize(r, int(buf)), off: off, n: n}
}

// next returns the next line with its '\n' (complete), or the bytes after
// the last '\n' at the end of the stream (complete false; the next call
// returns io.EOF). A line longer than MaxLine is returned cut to MaxLine
// bytes with long set. The line is valid until the next call.
func (lr *lineReader) next() (line []byte, complete, long bool, err error) {
	lr.acc = lr.acc[:0]
	var total int64
	for {
		b, err := lr.br.ReadSlice('\n')
		total += int64(len(b))
		switch err {
		case nil:
			lr.off += total
			lr.n++
			if len(lr.acc) == 0 && !long {
				return b, true, false, nil
			}
			lr.acc, long = appendCapped(lr.acc, b, long)
			return lr.acc, true, long, nil
		case bufio.ErrBufferFull:
			lr.acc, long = appendCapped(lr.acc, b, long)
		case io.EOF:
			if total == 0 {
				return nil, false, false, io.EOF
			}
			lr.acc, long = appendCapped(lr.acc, b, long)
			lr.n++
			return lr.acc, false, long, nil
		default:
			return nil, false, false, err
		}
	}
}

func appendCapped(acc, b []byte, long bool) ([]byte, bool) {
	if room := maxLine - len(acc); len(b) > room {
		return append(acc, b[:room]...), true
	}
	return append(acc, b...), long
}
