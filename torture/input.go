package torture

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
)

// lineKind is what a generated line is for its app.
type lineKind int

const (
	linePosting  lineKind = iota // ledger "aJ,3^t": one posting
	lineTransfer                 // ledger "transfer,dJ,cJ,3^t": two postings
	lineTick                     // ledger "tick", torture "timer,ID": a timer
	lineFail                     // ledger "fail": always fails (counted)
	lineBad                      // a line the app rejects (an output, no effect)
	lineOversize                 // longer than --max-line: skipped (counted)
	lineAlert                    // alerts: |amount| >= threshold: an Alert
	lineQuiet                    // alerts: below the threshold: nothing
	lineTally                    // torture "kJ,ID": a count
)

// line is one line the harness wrote into the input. A plain value.
type line struct {
	id   int
	text string
	kind lineKind
	// outputs are the identities (outputID) of the outputs it must have.
	outputs []string
	// postings: the ledger accounts it moves and, per account, the digit
	// of the base-3 balance it sets (account -> t: amount 3^t).
	postings map[string]int
}

// maxLineBytes is the --max-line of a scenario with oversized lines.
const maxLineBytes = 200

// lineGen generates the lines of a scenario's app. Each line has an
// identity that its outputs and its effect on the state show: a ledger
// line moves each account it touches by 3^t, t counting that account's
// lines, so that an account's balance in base 3 says how many times each
// of its lines was applied (a digit 2 is a line applied twice); an alerts
// line and a torture line carry a unique number. Not safe for concurrent
// use.
type lineGen struct {
	r       *rand.Rand
	s       *scenarioSpec
	next    int
	powers  map[string]int // account -> lines so far (the next t)
	acct    [3]int         // the current posting, debit and credit account numbers
	lines   []line
	maxLine int
	// atRisk are lines an operation destroyed while a run followed the
	// input, or a Kafka topic deleted with them: the source may never
	// have seen them, and no source can know they existed. The oracle does
	// not require them.
	atRisk map[int]bool
}

func newLineGen(s *scenarioSpec) *lineGen {
	return &lineGen{r: rand.New(rand.NewPCG(s.Seed, 0x5eed)), s: s, powers: map[string]int{}, atRisk: map[int]bool{}}
}

// maxPower is the last t of an account: sum(2*3^t, t <= 38) < 2^63.
const maxPower = 38

// account returns the account of class c (0 posting a, 1 debit d, 2
// credit c) for a new line and its t; an account whose powers are used
// up gives way to the next one. A few accounts take most lines, so that
// keys repeat (order per key matters).
func (g *lineGen) account(c int) (string, int) {
	prefix := [3]string{"a", "d", "c"}[c]
	j := g.acct[c] + g.r.IntN(5)
	for {
		name := prefix + strconv.Itoa(j)
		if t := g.powers[name]; t <= maxPower {
			return name, t
		}
		g.acct[c]++
		j = g.acct[c] + g.r.IntN(5)
	}
}

func pow3(t int) int64 {
	n := int64(1)
	for range t {
		n *= 3
	}
	return n
}

// gen returns n new lines, recorded in g.lines.
func (g *lineGen) gen(n int) []line {
	out := make([]line, 0, n)
	for range n {
		g.next++
		l := g.one(g.next)
		g.lines = append(g.lines, l)
		out = append(out, l)
	}
	return out
}

func (g *lineGen) one(id int) line {
	s := g.s
	x := g.r.IntN(100)
	if s.Oversize && x == 0 {
		return line{id: id, kind: lineOversize, text: "x" + strconv.Itoa(id) + "," + strings.Repeat("9", maxLineBytes+g.r.IntN(300))}
	}
	if x == 1 {
		return line{id: id, kind: lineBad, text: "bad" + strconv.Itoa(id), outputs: badOutputs(s.App, "bad"+strconv.Itoa(id))}
	}
	switch s.App {
	case "ledger":
		switch {
		case s.Poison && x == 2:
			return line{id: id, kind: lineFail, text: "fail"}
		case s.Ticks && x < 6:
			return line{id: id, kind: lineTick, text: "tick"}
		case x < 15:
			d, td := g.account(1)
			c, tc := g.account(2)
			// One amount moves both; each account's t must hold the
			// same amount: use the larger t for both and keep both
			// counters in step past it.
			t := max(td, tc)
			g.powers[d], g.powers[c] = t+1, t+1
			amt := pow3(t)
			return line{id: id, kind: lineTransfer, text: fmt.Sprintf("transfer,%s,%s,%d", d, c, amt),
				outputs:  []string{postingID(d, -amt), postingID(c, amt)},
				postings: map[string]int{d: t, c: t}}
		default:
			a, t := g.account(0)
			g.powers[a] = t + 1
			amt := pow3(t)
			return line{id: id, kind: linePosting, text: fmt.Sprintf("%s,%d", a, amt),
				outputs: []string{postingID(a, amt)}, postings: map[string]int{a: t}}
		}
	case "alerts":
		a := "a" + strconv.Itoa(g.r.IntN(8))
		if x < 40 {
			return line{id: id, kind: lineQuiet, text: fmt.Sprintf("%s,%d", a, g.r.IntN(999))}
		}
		amt := int64(1000 + id)
		return line{id: id, kind: lineAlert, text: fmt.Sprintf("%s,%d", a, amt), outputs: []string{"a:" + a + ":" + strconv.FormatInt(amt, 10)}}
	default:
		if s.Ticks && x < 6 {
			return line{id: id, kind: lineTick, text: "timer," + strconv.Itoa(id)}
		}
		k := "k" + strconv.Itoa(g.r.IntN(8))
		return line{id: id, kind: lineTally, text: fmt.Sprintf("%s,%d", k, id), outputs: []string{"t:" + k + ":" + strconv.Itoa(id)}}
	}
}

func postingID(account string, amount int64) string {
	return "p:" + account + ":" + strconv.FormatInt(amount, 10)
}

// badOutputs are the outputs of a line its app rejects.
func badOutputs(app, text string) []string {
	switch app {
	case "ledger":
		return []string{"r:" + text}
	case AppName:
		return []string{"x:" + text}
	}
	return nil // alerts emits nothing for it
}

// outputID is the identity of one output line of --out (a JSON value), ""
// for an output that identifies no line (a timer's).
func outputID(app string, b []byte) string {
	var m map[string]any
	if json.Unmarshal(b, &m) != nil {
		return ""
	}
	str := func(k string) string { s, _ := m[k].(string); return s }
	num := func(k string) string {
		f, ok := m[k].(float64)
		if !ok {
			return ""
		}
		return strconv.FormatInt(int64(f), 10)
	}
	switch {
	case app == "ledger" && m["rejected"] != nil:
		return "r:" + str("rejected")
	case app == "ledger" && m["account"] != nil:
		// Amounts up to 3^38 do not survive float64: read the number
		// exactly.
		var p struct {
			Account string      `json:"account"`
			Amount  json.Number `json:"amount"`
		}
		if json.Unmarshal(b, &p) != nil {
			return ""
		}
		return "p:" + p.Account + ":" + p.Amount.String()
	case app == "alerts":
		return "a:" + str("account") + ":" + num("amount")
	case app == AppName && m["rejected"] != nil:
		return "x:" + str("rejected")
	case app == AppName && m["key"] != nil:
		return "t:" + str("key") + ":" + num("id")
	}
	return ""
}
