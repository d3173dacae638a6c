package torture

import (
	"bufio"
	"bytes"
	"encoding/csv"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// checkTampered gives the verdicts a copy of a whole CSV recording from
// which the rows of one input were removed, the stream's indexes and its
// END count renumbered so that the stream reads whole: what an auditor
// receives when rows went missing. The COMMIT row still covers the input:
// verify, replay and explain must all call it not complete (invariant 3).
func (o *oracle) checkTampered(rec *recording, store string) {
	commit := int64(0)
	for _, r := range rec.rows {
		if r.kind == "COMMIT" && r.key == "" && r.seq > commit {
			commit = r.seq
		}
	}
	if commit < 2 {
		return
	}
	b, err := os.ReadFile(filepath.Join(o.sr.dir, store))
	if err != nil {
		return
	}
	out, removed, err := removeInput(b, commit-1)
	if err != nil || !removed {
		return
	}
	name := "tampered-" + store
	if err := os.WriteFile(filepath.Join(o.sr.dir, name), out, 0o644); err != nil {
		o.fail(InvAgree, "writing %s: %v", name, err)
		return
	}
	_, vcode := o.blackbox("verify", name)
	_, rcode := o.blackbox("replay", name)
	_, ecode := o.blackbox("explain", name)
	if vcode != 3 || rcode != 3 || ecode != 3 {
		o.fail(InvAgree, "%s lacks the rows of input seq %d, which its COMMIT row covers: verify exits %d, replay %d, explain %d (want 3, not complete, from each)",
			name, commit-1, vcode, rcode, ecode)
	}
}

// removeInput removes from a CSV recording the DELIVERY, input and OUTPUT
// rows of the input of seq in its stream, renumbers the indexes after them
// and lowers the stream's END count by one. It reports whether it found the
// input.
func removeInput(b []byte, seq int64) ([]byte, bool, error) {
	var lines [][]string
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 1<<20), 1<<27)
	header := ""
	for sc.Scan() {
		if header == "" {
			header = sc.Text()
			continue
		}
		r := csv.NewReader(strings.NewReader(sc.Text()))
		fs, err := r.Read()
		if err != nil {
			return nil, false, err
		}
		lines = append(lines, fs)
	}
	if err := sc.Err(); err != nil {
		return nil, false, err
	}
	const (
		proc  = 0
		index = 1
		kind  = 2
		sq    = 4
		n     = 9
	)
	// Find the input: an INLINE or INDEXED row of seq, with its DELIVERY
	// before it and its OUTPUT rows after it, in one stream.
	at := -1
	for i, fs := range lines {
		if (fs[kind] == "INLINE" || fs[kind] == "INDEXED") && fs[sq] == strconv.FormatInt(seq, 10) && fs[proc] != "" {
			at = i
			break
		}
	}
	if at < 1 || lines[at-1][kind] != "DELIVERY" || lines[at-1][proc] != lines[at][proc] {
		return nil, false, nil
	}
	stream := lines[at][proc]
	drop := map[int]bool{at - 1: true, at: true}
	outputs, _ := strconv.Atoi(lines[at][n])
	for j, k := at+1, 0; j < len(lines) && k < outputs; j++ {
		if lines[j][proc] != stream {
			continue
		}
		if lines[j][kind] != "OUTPUT" {
			return nil, false, nil
		}
		drop[j] = true
		k++
	}
	var buf bytes.Buffer
	buf.WriteString(header + "\n")
	w := csv.NewWriter(&buf)
	shift := 0
	for i, fs := range lines {
		if drop[i] {
			shift++
			continue
		}
		if fs[proc] == stream && i > at {
			idx, err := strconv.Atoi(fs[index])
			if err != nil {
				return nil, false, err
			}
			fs[index] = strconv.Itoa(idx - shift)
			if fs[kind] == "END" {
				c, _ := strconv.Atoi(fs[n])
				fs[n] = strconv.Itoa(c - 1)
			}
		}
		if err := w.Write(fs); err != nil {
			return nil, false, err
		}
	}
	w.Flush()
	if err := w.Error(); err != nil {
		return nil, false, fmt.Errorf("torture: writing the tampered copy: %w", err)
	}
	return buf.Bytes(), true, nil
}
