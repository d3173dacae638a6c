package sqlitestore

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
)

// The write-ahead log's layout (https://sqlite.org/fileformat2.html#walformat):
// a 32-byte header, then frames of a 24-byte header and a page.
const (
	walHeader      = 32
	walFrameHeader = 24
	walMagic       = 0x377f0682 // its low bit: checksums of big-endian words
)

// walPage returns the page pgno as the write-ahead log at path holds it in
// its last committed frame of the page (nil when the log does not exist or
// holds no committed frame of it). Frames are read as SQLite recovers them:
// from the first, while each has the header's salts and the checksum that
// chains it to the frames before it; only frames up to the last commit frame
// (one naming the database's size) count. The log is read one frame at a
// time.
func walPage(path string, pgno uint32, pageSize int64) ([]byte, error) {
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	r := bufio.NewReader(f)
	hdr := make([]byte, walHeader)
	if _, err := io.ReadFull(r, hdr); err != nil {
		return nil, nil // no header: SQLite ignores the log
	}
	be := binary.BigEndian
	magic := be.Uint32(hdr)
	if magic&^1 != walMagic || int64(be.Uint32(hdr[8:])) != pageSize {
		return nil, nil
	}
	order := binary.ByteOrder(binary.LittleEndian)
	if magic&1 == 1 {
		order = binary.BigEndian
	}
	var s1, s2 uint32
	sum := func(b []byte) {
		for i := 0; i+8 <= len(b); i += 8 {
			s1 += order.Uint32(b[i:]) + s2
			s2 += order.Uint32(b[i+4:]) + s1
		}
	}
	sum(hdr[:24])
	if s1 != be.Uint32(hdr[24:]) || s2 != be.Uint32(hdr[28:]) {
		return nil, nil
	}
	frame := make([]byte, walFrameHeader+pageSize)
	var pending, committed []byte
	for {
		if _, err := io.ReadFull(r, frame); err != nil {
			if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
				return committed, nil // a torn last frame is no frame
			}
			return nil, fmt.Errorf("reading %s: %w", path, err)
		}
		fh, page := frame[:walFrameHeader], frame[walFrameHeader:]
		if be.Uint32(fh) == 0 || !bytes.Equal(fh[8:16], hdr[16:24]) {
			return committed, nil
		}
		sum(fh[:8])
		sum(page)
		if s1 != be.Uint32(fh[16:]) || s2 != be.Uint32(fh[20:]) {
			return committed, nil
		}
		if be.Uint32(fh) == pgno {
			pending = append(pending[:0], page...)
		}
		if be.Uint32(fh[4:]) != 0 && pending != nil { // a commit frame
			committed = append(committed[:0], pending...)
		}
	}
}
