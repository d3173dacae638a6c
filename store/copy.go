package store

import (
	"errors"
	"fmt"
)

// copyBatch is the number of rows Copy hands to one Append.
const copyBatch = 1024

// copyProblemLimit bounds the problems a Copy error lists.
const copyProblemLimit = 100

// Copy appends every readable row of src to dst, in storage order
// (src.Rows()), losslessly: the rows read back from dst equal the rows of
// src. It appends in batches, so dst is one Append per 1,024 rows, not one
// per input.
//
// A source with integrity problems is copied as it is (an unfinished or
// gapped recording converts to an equally unfinished or gapped one). Only
// rows that cannot be read cannot be copied: a malformed row or a torn last
// line. Copy skips them, copies the rest, and returns an error wrapping each
// such *Problem (errors.Is(err, ErrMalformed), ErrTorn), because the copy
// then differs from the source: the skipped row becomes a gap. Any other
// read or append error stops the copy and is returned.
func Copy(dst Writer, src Reader) error {
	var (
		batch   = make([]Entry, 0, copyBatch)
		skipped []error
		nskip   int
	)
	skip := func(p *Problem) {
		nskip++
		if len(skipped) < copyProblemLimit {
			skipped = append(skipped, p)
		}
	}
	for e, err := range src.Rows() {
		if err != nil {
			var p *Problem
			if errors.As(err, &p) {
				if p.Kind != ProblemTorn {
					skip(p)
				}
				continue
			}
			return fmt.Errorf("store: copy: %w", err)
		}
		batch = append(batch, e)
		if len(batch) == copyBatch {
			if err := dst.Append(batch...); err != nil {
				return fmt.Errorf("store: copy: %w", err)
			}
			batch = batch[:0]
		}
	}
	if len(batch) > 0 {
		if err := dst.Append(batch...); err != nil {
			return fmt.Errorf("store: copy: %w", err)
		}
	}
	for _, p := range src.Problems() {
		if p.Kind == ProblemTorn {
			skip(&p)
		}
	}
	if nskip > 0 {
		return fmt.Errorf("store: copy: %d rows of the source could not be read and were not copied: %w",
			nskip, errors.Join(skipped...))
	}
	return nil
}
