package cli_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/blackbox-audit/blackbox/cmd/cli"
	"github.com/blackbox-audit/blackbox/console"
	"github.com/blackbox-audit/blackbox/engine"
	"github.com/blackbox-audit/blackbox/store"
)

const aliceToken = "alice-0123456789abcdef"

// child is a `blackbox run --listen` process: its stderr lines on a
// channel (closed at EOF), its stdout kept.
type child struct {
	cmd    *exec.Cmd
	lines  chan string
	stdout bytes.Buffer
	addr   string
}

// startListening starts blackbox with args in dir and waits for the line
// saying where its window listens.
func startListening(t *testing.T, dir string, args ...string) *child {
	t.Helper()
	c := &child{cmd: exec.Command(blackboxBinary(t), args...), lines: make(chan string, 64)}
	c.cmd.Dir = dir
	c.cmd.Env = append(os.Environ(), childEnv+"=")
	c.cmd.Stdout = &c.stdout
	stderr, err := c.cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := c.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		c.cmd.Process.Kill() // os.ErrProcessDone once waited for
		c.cmd.Wait()
	})
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			c.lines <- sc.Text()
		}
		close(c.lines)
	}()
	c.addr = "http://" + strings.TrimPrefix(c.await(t, "blackbox: listening on "), "blackbox: listening on http://")
	return c
}

// await waits for a stderr line beginning with prefix (30s at most: a
// bound on a broken run) and returns it.
func (c *child) await(t *testing.T, prefix string) string {
	t.Helper()
	timeout := time.After(30 * time.Second)
	for {
		select {
		case l, ok := <-c.lines:
			if !ok {
				t.Fatalf("stderr ended before a line %q", prefix)
			}
			if strings.HasPrefix(l, prefix) {
				return l
			}
			t.Logf("stderr: %s", l)
		case <-timeout:
			t.Fatalf("no line %q within 30s", prefix)
		}
	}
}

// get returns GET path's status and body.
func (c *child) get(t *testing.T, path string) (int, string) {
	t.Helper()
	res, err := http.Get(c.addr + path)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	return res.StatusCode, string(b)
}

// post sends a control action with token and returns the status and the
// answer.
func (c *child) post(t *testing.T, token string, action console.Action, req console.Request) (int, console.Answer) {
	t.Helper()
	body, _ := json.Marshal(req)
	hr, err := http.NewRequest(http.MethodPost, c.addr+console.PathControl+string(action), bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	hr.Header.Set("Authorization", "Bearer "+token)
	res, err := http.DefaultClient.Do(hr)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var ans console.Answer
	if err := json.NewDecoder(res.Body).Decode(&ans); err != nil {
		t.Fatal(err)
	}
	return res.StatusCode, ans
}

// A real `blackbox run --follow --listen 127.0.0.1:0` over loopback: it
// prints where it listens; /livez, /metrics, /status and /bindings answer
// while it runs; alice pauses and resumes the group (a request without
// her token is refused); SIGTERM makes /readyz 503 "draining" at once
// while /livez stays 200 through --shutdown-delay, a second SIGTERM ends
// the delay, the run drains and exits 0. The recording is complete and
// holds alice's two actions as CONTROL rows, which explain lists.
func TestRunListenServesTheWindowAndRecordsEachAction(t *testing.T) {
	dir := t.TempDir()
	var lines []string
	for i := range 20 {
		lines = append(lines, fmt.Sprintf("acct-%02d,%d", i%3, i+1))
	}
	writeLines(t, filepath.Join(dir, "in.txt"), lines...)
	if err := os.WriteFile(filepath.Join(dir, "tokens"), []byte("# operators\nalice "+aliceToken+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	c := startListening(t, dir, "run", "--app", "ledger", "--input", "in.txt", "--store", "rec.csv", "--follow",
		"--listen", "127.0.0.1:0", "--control-token-file", "tokens", "--shutdown-delay", "1m", "--log-format", "json")

	if code, body := c.get(t, console.PathLivez); code != http.StatusOK {
		t.Errorf("livez: %d %q", code, body)
	}
	code, body := c.get(t, console.PathMetrics)
	if code != http.StatusOK || !strings.Contains(body, `blackbox_binding_loss_state{feed="input",group="main",state="UP"} 1`) ||
		!strings.Contains(body, "# TYPE blackbox_recording_appends_total counter") || // rows_total has no series before the first append
		!strings.Contains(body, "# TYPE blackbox_recording_batch_rows histogram") {
		t.Errorf("metrics: %d\n%s", code, body)
	}
	code, body = c.get(t, console.PathStatus)
	var st struct {
		Feeds []struct{ Feed string } `json:"feeds"`
	}
	if err := json.Unmarshal([]byte(body), &st); code != http.StatusOK || err != nil || len(st.Feeds) != 1 || st.Feeds[0].Feed != "input" {
		t.Errorf("status: %d %q (%v)", code, body, err)
	}
	binding := func() console.Binding {
		t.Helper()
		code, body := c.get(t, console.PathBindings)
		var bs []console.Binding
		if err := json.Unmarshal([]byte(body), &bs); code != http.StatusOK || err != nil || len(bs) != 1 || bs[0].Group != "main" {
			t.Fatalf("bindings: %d %q (%v)", code, body, err)
		}
		return bs[0]
	}
	if code, ans := c.post(t, "mallory-0123456789abcdef", console.ActionPause, console.Request{Feed: "input", Group: "main", Reason: "x", Indefinite: true}); code != http.StatusUnauthorized || ans.Applied {
		t.Errorf("pause with another token: %d %+v, want 401", code, ans)
	}
	if code, ans := c.post(t, aliceToken, console.ActionPause, console.Request{Feed: "input", Group: "main", Reason: "sink deploy", Indefinite: true}); code != http.StatusOK || !ans.Applied || ans.Who != "alice" {
		t.Fatalf("pause: %d %+v", code, ans)
	}
	if b := binding(); !b.Fenced {
		t.Errorf("binding %+v after the pause: want fenced", b)
	}
	if code, ans := c.post(t, aliceToken, console.ActionResume, console.Request{Feed: "input", Group: "main", Reason: "deployed"}); code != http.StatusOK || !ans.Applied {
		t.Fatalf("resume: %d %+v", code, ans)
	}
	if b := binding(); b.Fenced {
		t.Errorf("binding %+v after the resume: want not fenced", b)
	}

	if err := c.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	c.await(t, "blackbox: stopping: ")
	code, body = c.get(t, console.PathReadyz)
	var rd console.Readiness
	if err := json.Unmarshal([]byte(body), &rd); code != http.StatusServiceUnavailable || err != nil || rd.State != console.StateDraining {
		t.Errorf("readyz after SIGTERM: %d %q (%v), want 503 draining", code, body, err)
	}
	if code, body := c.get(t, console.PathLivez); code != http.StatusOK {
		t.Errorf("livez during the shutdown delay: %d %q, want 200", code, body)
	}
	if err := c.cmd.Process.Signal(syscall.SIGTERM); err != nil { // ends the delay
		t.Fatal(err)
	}
	for l := range c.lines {
		t.Logf("stderr: %s", l)
	}
	err := c.cmd.Wait()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		t.Fatal(err)
	}
	if code := c.cmd.ProcessState.ExitCode(); code != 0 {
		t.Fatalf("exit %d, want 0:\n%s", code, c.stdout.String())
	}
	if !strings.Contains(c.stdout.String(), "verdict   settled: yes  lossless: yes") {
		t.Errorf("stdout:\n%s", c.stdout.String())
	}

	r, err := store.Open(filepath.Join(dir, "rec.csv"))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if ps := r.Problems(); len(ps) != 0 {
		t.Errorf("problems %v, want none", ps)
	}
	got := recordedActions(t, r, func(ct store.Control) string {
		return ct.Who + " " + ct.Action + " " + ct.Feed + "/" + ct.Group + ": " + ct.Reason
	}, nil)
	if want := []string{"alice pause input/main: sink deploy", "alice resume input/main: deployed"}; strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("CONTROL rows %q, want %q", got, want)
	}
	code2, out := execute(t, context.Background(), "explain", filepath.Join(dir, "rec.csv"))
	if code2 != cli.ExitOK || !strings.Contains(out, "operator actions: 2") || !strings.Contains(out, `alice: pause feed "input" group "main"`) {
		t.Errorf("explain: exit %d\n%s", code2, out)
	}
	code2, out = execute(t, context.Background(), "replay", filepath.Join(dir, "rec.csv"))
	if code2 != cli.ExitOK || !strings.Contains(out, "operator actions: 2 (CONTROL rows, not replayed)") ||
		!regexp.MustCompile(`(?m)^  \S+ alice: pause feed "input" group "main" \(position \d+ -> \d+\): sink deploy \(CONTROL:\d+\)$`).MatchString(out) ||
		!regexp.MustCompile(`(?m)^  \S+ alice: resume feed "input" group "main" \(position \d+ -> \d+\): deployed \(CONTROL:\d+\)$`).MatchString(out) {
		t.Errorf("replay: exit %d\n%s", code2, out)
	}
	code2, out = execute(t, context.Background(), "replay", "--json", filepath.Join(dir, "rec.csv"))
	var rep struct {
		Identical bool
		Controls  []struct {
			Action, Who, Reason, Feed, Group string
			At                               time.Time
		}
	}
	if err := json.Unmarshal([]byte(out), &rep); code2 != cli.ExitOK || err != nil || !rep.Identical || len(rep.Controls) != 2 ||
		rep.Controls[0].Action != "pause" || rep.Controls[0].Who != "alice" || rep.Controls[0].Reason != "sink deploy" ||
		rep.Controls[1].Action != "resume" || rep.Controls[1].Feed != "input" || rep.Controls[1].Group != "main" || rep.Controls[1].At.IsZero() {
		t.Errorf("replay --json: exit %d (%v)\n%s", code2, err, out)
	}
}

// TestCtlAndTopDriveARealRun: blackbox ctl and blackbox top against a real
// `blackbox run --listen`: top --once --plain shows the run's feed and
// group, ctl pauses the group (the window says it is fenced), resumes it,
// and kills the run, which ends killed; the recording holds the three
// actions as CONTROL rows with the operator's name.
func TestCtlAndTopDriveARealRun(t *testing.T) {
	dir := t.TempDir()
	var lines []string
	for i := range 20 {
		lines = append(lines, fmt.Sprintf("acct-%02d,%d", i%3, i+1))
	}
	writeLines(t, filepath.Join(dir, "in.txt"), lines...)
	tokens := filepath.Join(dir, "tokens")
	if err := os.WriteFile(tokens, []byte("alice "+aliceToken+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	c := startListening(t, dir, "run", "--app", "ledger", "--input", "in.txt", "--store", "rec.csv", "--follow",
		"--listen", "127.0.0.1:0", "--control-token-file", "tokens")
	addr := strings.TrimPrefix(c.addr, "http://")
	ctx := context.Background()

	code, out := execute(t, ctx, "top", addr, "--once", "--plain", "--interval", "0")
	if code != cli.ExitOK || !strings.Contains(out, "input") || !strings.Contains(out, "main") {
		t.Errorf("top --once --plain: exit %d\n%s", code, out)
	}
	ctl := func(args ...string) string {
		t.Helper()
		code, out := execute(t, ctx, append(append([]string{"ctl", addr}, args...), "--token-file", tokens, "--yes")...)
		if code != cli.ExitOK {
			t.Fatalf("ctl %v: exit %d\n%s", args, code, out)
		}
		return out
	}
	ctl("pause", "--group", "main", "--until", "10m", "--reason", "sink deploy")
	cl, err := console.NewClient(addr, console.ClientOptions{})
	if err != nil {
		t.Fatal(err)
	}
	bs, err := cl.Bindings(ctx)
	if err != nil || len(bs) != 1 || !bs[0].Fenced || bs[0].PausedUntil == nil {
		t.Fatalf("bindings after ctl pause: %+v (%v), want one fenced until a deadline", bs, err)
	}
	ctl("resume", "--group", "main", "--reason", "deployed")
	if bs, err := cl.Bindings(ctx); err != nil || len(bs) != 1 || bs[0].Fenced {
		t.Fatalf("bindings after ctl resume: %+v (%v), want not fenced", bs, err)
	}
	ctl("kill", "--reason", "incident 7")
	for l := range c.lines {
		t.Logf("stderr: %s", l)
	}
	err = c.cmd.Wait()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		t.Fatal(err)
	}
	if code := c.cmd.ProcessState.ExitCode(); code == cli.ExitOK {
		t.Errorf("a killed run exited 0:\n%s", c.stdout.String())
	}

	r, err := store.Open(filepath.Join(dir, "rec.csv"))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	got := recordedActions(t, r, func(ct store.Control) string { return ct.Who + " " + ct.Action + ": " + ct.Reason }, nil)
	want := []string{"alice pause: sink deploy", "alice resume: deployed", "alice kill: incident 7"}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("CONTROL rows %q, want %q", got, want)
	}
}

// until GETs path from the run (every 5ms, 30s at most: the run is
// another process, with no hook to wait on) until ok says its answer, the
// JSON decoded into v, is the one awaited.
func (c *child) until(t *testing.T, path, what string, v any, ok func() bool) {
	t.Helper()
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	timeout := time.After(30 * time.Second)
	for {
		_, body := c.get(t, path)
		if err := json.Unmarshal([]byte(body), v); err != nil {
			t.Fatalf("%s: %q (%v)", path, body, err)
		}
		if ok() {
			return
		}
		select {
		case <-tick.C:
		case <-timeout:
			t.Fatalf("not within 30s: %s; %s %s", what, path, body)
		}
	}
}

// A real `blackbox run --listen` whose binding latches: a drop queue of
// one slot, a processor slowed to 300ms an item and --latch every-loss
// lose a line of three at once (at most two fit, held and queued), which
// latches the binding: /readyz is 503 "latched" naming the feed, /livez
// stays 200. `ctl clear` ends the latch: /readyz is 200. The recording
// holds the clear as a CONTROL row and the latch and its end as STATE rows;
// the run, stopped by SIGTERM, lost nothing since the clear (exit 0).
func TestReadyzIsLatchedUntilCtlClear(t *testing.T) {
	dir := t.TempDir()
	writeLines(t, filepath.Join(dir, "in.txt"), "acct-1,1", "acct-2,2", "acct-3,3")
	tokens := filepath.Join(dir, "tokens")
	if err := os.WriteFile(tokens, []byte("alice "+aliceToken+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	c := startListening(t, dir, "run", "--app", "ledger", "--input", "in.txt", "--store", "rec.csv", "--follow",
		"--policy", "drop", "--spin", "0s", "--queue", "1", "--delay", "300ms", "--latch", "every-loss",
		"--listen", "127.0.0.1:0", "--control-token-file", "tokens")
	// Every line published (no drop can come later), the binding latched,
	// and the run's loop begun (/readyz is "starting" before).
	var st engine.Status
	c.until(t, console.PathStatus, "three lines published, the binding latched", &st, func() bool {
		return len(st.Feeds) == 1 && st.Feeds[0].Sequence == 3 && len(st.Feeds[0].Subscribers) == 1 &&
			st.Feeds[0].Subscribers[0].Loss.State == engine.LossLatched
	})
	var rd console.Readiness
	c.until(t, console.PathReadyz, "the run's loop begun", &rd, func() bool { return rd.State != console.StateStarting })
	code, body := c.get(t, console.PathReadyz)
	if err := json.Unmarshal([]byte(body), &rd); code != http.StatusServiceUnavailable || err != nil || rd.Ready ||
		rd.State != console.StateLatched || len(rd.Feeds) != 1 || rd.Feeds[0].State != console.StateLatched ||
		!strings.Contains(rd.Reason, `feed "input": queue main/input is LATCHED`) {
		t.Errorf("readyz once latched: %d %s (%v), want 503 latched", code, body, err)
	}
	if code, body := c.get(t, console.PathLivez); code != http.StatusOK {
		t.Errorf("livez once latched: %d %q, want 200", code, body)
	}
	addr := strings.TrimPrefix(c.addr, "http://")
	if code, out := execute(t, context.Background(), "ctl", addr, "clear", "--feed", "input", "--group", "main",
		"--reason", "lines re-read from the source", "--token-file", tokens, "--yes"); code != cli.ExitOK {
		t.Fatalf("ctl clear: exit %d\n%s", code, out)
	}
	code, body = c.get(t, console.PathReadyz)
	if err := json.Unmarshal([]byte(body), &rd); code != http.StatusOK || err != nil || !rd.Ready || rd.State != console.StateRunning {
		t.Errorf("readyz after ctl clear: %d %s (%v), want 200 running", code, body, err)
	}

	if err := c.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	for l := range c.lines {
		t.Logf("stderr: %s", l)
	}
	if err := c.cmd.Wait(); err != nil && !errors.As(err, new(*exec.ExitError)) {
		t.Fatal(err)
	}
	// The clear began the binding's loss window anew (docs/GUARANTEES.md):
	// nothing was lost since, the run is lossless.
	if code := c.cmd.ProcessState.ExitCode(); code != cli.ExitOK {
		t.Errorf("exit %d, want 0:\n%s", code, c.stdout.String())
	}
	r, err := store.Open(filepath.Join(dir, "rec.csv"))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	got := recordedActions(t, r,
		func(ct store.Control) string {
			return "CONTROL " + ct.Who + " " + ct.Action + " " + ct.Feed + "/" + ct.Group + ": " + ct.Reason
		},
		func(st store.State) string {
			return "STATE " + st.Feed + "/" + st.Group + " " + st.From + " -> " + st.To
		})
	// The clear's change is made (a STATE row) before the CONTROL row that
	// records the action with the positions around it.
	want := []string{"STATE input/main UP -> LATCHED", "STATE input/main LATCHED -> UP", "CONTROL alice clear input/main: lines re-read from the source"}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("rows %q, want %q", got, want)
	}
}

// A real `blackbox run --kafka --listen` whose processor holds its first
// record (the source stops fetching once its queue is full): /metrics
// lists each partition's end as the brokers have it at the scrape, also
// after records the source never fetched were produced; and the client's
// own metrics (kprom: blackbox_kafka_client_*).
func TestMetricsListTheKafkaPartitionsEndsAtTheScrape(t *testing.T) {
	brokers, adm := kafkaTopic(t, "postings", 30)
	dir := t.TempDir()
	c := startListening(t, dir, "run", "--app", "ledger", "--kafka", brokers, "--topic", "postings", "--group", "g",
		"--store", "rec.csv", "--follow", "--queue", "4", "--delay", "1h", "--listen", "127.0.0.1:0")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	endLines := func() []string {
		t.Helper()
		ends, err := adm.ListEndOffsets(ctx, "postings")
		if err != nil {
			t.Fatal(err)
		}
		var want []string
		ends.Each(func(o kadm.ListedOffset) {
			want = append(want, fmt.Sprintf(`blackbox_kafka_partition_end_offset{feed="input",partition="postings/%d"} %d`, o.Partition, o.Offset))
		})
		return want
	}
	has := func(body string, lines []string) bool {
		for _, l := range lines {
			if !strings.Contains(body, l+"\n") {
				return false
			}
		}
		return true
	}
	want := endLines()
	var body string
	tick := time.NewTicker(5 * time.Millisecond) // the run is another process: no hook to wait on
	defer tick.Stop()
	client := func(body string) bool { // the client connected and fetched
		return regexp.MustCompile(`(?m)^blackbox_kafka_client_connects_total\{node_id="[^"]+"\} [1-9]`).MatchString(body) &&
			regexp.MustCompile(`(?m)^blackbox_kafka_client_fetch_bytes_total\{node_id="[^"]+",topic="postings"\} [1-9]`).MatchString(body)
	}
	for _, body = c.get(t, console.PathMetrics); !has(body, want) || !client(body); _, body = c.get(t, console.PathMetrics) {
		select {
		case <-tick.C:
		case <-ctx.Done():
			t.Fatalf("metrics do not list %q and the client's connections and bytes fetched within a minute:\n%s", want, body)
		}
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(strings.Split(brokers, ",")...), kgo.DefaultProduceTopic("postings"))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	for i := range 9 {
		if err := cl.ProduceSync(ctx, &kgo.Record{Key: fmt.Appendf(nil, "acct-%d", i), Value: []byte("acct,1")}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	want = endLines()
	if _, body = c.get(t, console.PathMetrics); !has(body, want) {
		t.Errorf("after 9 more records: metrics do not list %q:\n%s", want, body)
	}
}

// recordedActions lists r's CONTROL rows as control formats them and, when
// state is not nil, its STATE rows as state formats them, in row order.
func recordedActions(t *testing.T, r store.Reader, control func(store.Control) string, state func(store.State) string) []string {
	t.Helper()
	var got []string
	for e, err := range r.Rows() {
		if err != nil {
			t.Fatal(err)
		}
		switch {
		case e.Kind == store.KindControl:
			ct, err := store.ControlOf(e)
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, control(ct))
		case e.Kind == store.KindState && state != nil:
			st, err := store.StateOf(e)
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, state(st))
		}
	}
	return got
}
