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

// Verifier is implemented by readers that re-check their recording
// themselves, with their own row numbering (CSV physical lines, SQLite
// rowids). Every store of this module implements it.
type Verifier interface {
	Verify() []Problem
}

// Verify re-reads r and returns its integrity problems. A Verifier checks
// itself; for another Reader, Verify runs a Checker over r.Rows(), rows
// numbered by position (META = 1) unless a row's error is a *Problem with
// its own Line, and an error that is not a *Problem (a read error) becomes
// an unreadable Problem that ends the check.
func Verify(r Reader) []Problem {
	if v, ok := r.(Verifier); ok {
		return v.Verify()
	}
	var c Checker
	var line int64
	for e, err := range r.Rows() {
		line++
		if err != nil {
			var p *Problem
			if errors.As(err, &p) {
				if p.Line == 0 {
					p.Line = line
				}
				c.Report(*p)
				continue
			}
			c.Report(Problem{Kind: ProblemUnreadable, Line: line, Detail: fmt.Sprintf("read error: %v", err)})
			break
		}
		c.Add(e, line)
	}
	return c.Finish()
}
