package cli_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/blackbox-audit/blackbox/cmd/cli"
)

// crashed is a ledger run killed after its second input (no END), its
// pointer committed after the first.
const crashed = `processor,index,kind,source,seq,instant,epoch,key,offset,n,payload,detail,reads
,1,META,,0,,0,,0,0,,"{""format"":""blackbox-recording/5"",""created"":""2030-01-01T00:00:00Z"",""apps"":{""ledger"":""ledger""},""options"":{""codec"":""json"",""durability"":""write""},""streams"":[""ledger""]}",
ledger,1,START,,0,2030-01-01T00:00:01Z,0,,0,0,,,
ledger,2,DELIVERY,input,1,,1796225929894306535,,10,0,,,
ledger,3,INLINE,input,1,2030-01-01T00:00:02Z,0,,0,1,"""alice,100""",,2031-01-01T00:00:00Z
ledger,4,OUTPUT,ledger,1,,0,,0,0,"{""account"":""alice"",""amount"":100,""balance"":100,""at"":""2031-01-01T00:00:00Z""}",,
,2,COMMIT,input,1,,1796225929894306535,,10,0,,,
ledger,5,DELIVERY,input,2,,1796225929894306535,,16,0,,,
ledger,6,INLINE,input,2,2030-01-01T00:00:03Z,0,,0,1,"""bob,5""",,2031-01-01T00:00:01Z
ledger,7,OUTPUT,ledger,1,,0,,0,0,"{""account"":""bob"",""amount"":5,""balance"":5,""at"":""2031-01-01T00:00:01Z""}",,
`

// restarted is its restart, which applied bob,5 again (a ledger without a
// state file): the same output but for its clock reading "at".
const restarted = `processor,index,kind,source,seq,instant,epoch,key,offset,n,payload,detail,reads
,1,META,,0,,0,,0,0,,"{""format"":""blackbox-recording/5"",""created"":""2030-01-01T00:01:00Z"",""apps"":{""ledger"":""ledger""},""options"":{""codec"":""json"",""durability"":""write""},""streams"":[""ledger""]}",
ledger,1,START,,0,2030-01-01T00:01:01Z,0,,0,0,,,
ledger,2,DELIVERY,input,1,,1796225929894306535,,16,0,,,
ledger,3,INLINE,input,1,2030-01-01T00:01:02Z,0,,0,1,"""bob,5""",,2031-01-01T00:01:00Z
ledger,4,OUTPUT,ledger,1,,0,,0,0,"{""account"":""bob"",""amount"":5,""balance"":5,""at"":""2031-01-01T00:01:00Z""}",,
,2,COMMIT,input,1,,1796225929894306535,,16,0,,,
ledger,5,END,,0,2030-01-01T00:01:03Z,0,,0,1,,,
`

// TestReportIgnoresKeysWhenItComparesAnOutputEmittedTwice: an output a
// restart emitted again, equal but for its clock reading, is "different the
// second time" unless --ignore at leaves the key out; the page states the
// runs' one epoch once, not on every position; and it says its input
// counts include re-deliveries.
func TestReportIgnoresKeysWhenItComparesAnOutputEmittedTwice(t *testing.T) {
	dir := t.TempDir()
	a, b := filepath.Join(dir, "run-1.csv"), filepath.Join(dir, "run-2.csv")
	for p, s := range map[string]string{a: crashed, b: restarted} {
		if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		name      string
		args      []string
		different bool
	}{
		{"without --ignore", nil, true},
		{"--ignore at", []string{"--ignore", "at"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			html := filepath.Join(dir, strings.ReplaceAll(tc.name, " ", "")+".html")
			code, out := execute(t, t.Context(), append([]string{"report", a + "," + b, "-o", html}, tc.args...)...)
			if code != cli.ExitOK {
				t.Fatalf("report exit %d:\n%s", code, out)
			}
			page, err := os.ReadFile(html)
			if err != nil {
				t.Fatal(err)
			}
			if got := strings.Contains(string(page), "(different the second time)"); got != tc.different {
				t.Errorf("\"different the second time\": %v, want %v", got, tc.different)
			}
			if n := strings.Count(string(page), "1796225929894306535"); n != 2 { // the sentence, its data-epoch
				t.Errorf("the epoch is on the page %d times, want once (and its data attribute)", n)
			}
			for _, want := range []string{"Every position below is in epoch 1796225929894306535.", "offset 16, output 1 to ledger",
				"an input a restart delivered again counts once in each run that had it"} {
				if !strings.Contains(string(page), want) {
					t.Errorf("page lacks %q", want)
				}
			}
		})
	}
}
