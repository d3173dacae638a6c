// Package csvstore is the CSV backend of store (store.Backend, registered as
// "csv": store.Create picks it for a path ending in .csv, store.Open for a
// file that begins with the header line). It stores recordings as CSV files (docs/FORMAT.md): a
// header line, then one row per physical line terminated by "\n", columns
// processor,index,kind,source,seq,instant,epoch,key,offset,n,payload,detail,reads.
//
// Create starts a new recording (never over a file that holds bytes);
// each Append is one write(2) of all its rows, so a crash leaves at most one
// torn last line. Open reads a recording, possibly one still being written,
// as it is when opened: it reads the header, the META row and the end of
// the file (the torn last line is set aside). Scan reads the file once,
// streaming (store.Recording checks the rows as it goes, so that a replay,
// explain and report read the file once); Stream skips the lines of other
// processors undecoded (store.StreamSeeker); Journal keeps a forward cursor
// per feed. Memory does not grow with the recording's length.
//
// One codec. The record struct's csv tags are the columns, as
// github.com/gocarina/gocsv maps them (tests check the documented header
// and the codec's column order against them; nothing reflects at init).
// Every line is written by one encoder (appendRow: encoding/csv's quoting,
// no reflection). Well-formed lines are read by a hand-written decoder
// with the same semantics (fast.go); every other line is split by
// encoding/csv, one physical line at a time, and mapped by gocsv (made on
// first use), so that a corrupt line is one malformed Problem naming its
// line and column by encoding/csv's rules, never a line that swallows the
// next ones. The two decoders agree on every line (a fuzz target).
package csvstore
