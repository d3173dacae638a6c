package csvstore

import "github.com/blackbox-audit/blackbox/store"

// DecodeRowGocsv decodes one line with gocsv only: the reference the fast
// decoder is checked against.
func DecodeRowGocsv(line []byte) (store.Entry, error) {
	e, re := newDecoder().decodeGocsv(line)
	if re != nil {
		return store.Entry{}, re
	}
	return e, nil
}

// DecodeRowCheck decodes one line as Open's integrity scan does.
func DecodeRowCheck(line []byte) (store.Entry, error) {
	e, re := newDecoder().decodeAs(line, check)
	if re != nil {
		return store.Entry{}, re
	}
	return e, nil
}

// DecodeRowBorrow decodes one line as Streams does: the Entry's Payload
// and Reads are the decoder's.
func DecodeRowBorrow(line []byte) (store.Entry, error) {
	e, re := newDecoder().decodeAs(line, borrow)
	if re != nil {
		return store.Entry{}, re
	}
	return e, nil
}
