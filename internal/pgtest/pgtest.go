package pgtest

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// Server is a running throwaway PostgreSQL server. Its methods are safe
// for concurrent use.
type Server struct {
	dir  string // the temporary directory: data/ and the socket
	bin  string // the directory of initdb, pg_ctl
	cred *syscall.Credential
	next atomic.Int64 // the number of the next database
}

// ErrNoServer: no PostgreSQL server could be started on this machine.
var ErrNoServer = errors.New("pgtest: no PostgreSQL server")

// binDir returns the directory of initdb and pg_ctl: $PGTEST_BIN, else the
// newest /usr/lib/postgresql/*/bin that has them.
func binDir() (string, error) {
	if d := os.Getenv("PGTEST_BIN"); d != "" {
		return d, nil
	}
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	sort.Slice(dirs, func(i, j int) bool { return version(dirs[i]) > version(dirs[j]) })
	for _, d := range dirs {
		if _, err := os.Stat(filepath.Join(d, "pg_ctl")); err == nil {
			return d, nil
		}
	}
	return "", fmt.Errorf("%w: no /usr/lib/postgresql/*/bin/pg_ctl (apt-get install postgresql, or set PGTEST_BIN)", ErrNoServer)
}

func version(dir string) int {
	n, _ := strconv.Atoi(filepath.Base(filepath.Dir(dir)))
	return n
}

// Start starts a server on a new temporary directory. Stop stops it and
// removes the directory.
func Start() (*Server, error) {
	bin, err := binDir()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "pgtest-")
	if err != nil {
		return nil, err
	}
	s := &Server{dir: dir, bin: bin}
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			os.RemoveAll(dir)
			return nil, fmt.Errorf("%w: running as root and there is no postgres user to run the server as: %v", ErrNoServer, err)
		}
		uid, _ := strconv.ParseUint(u.Uid, 10, 32)
		gid, _ := strconv.ParseUint(u.Gid, 10, 32)
		s.cred = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
		if err := os.Chown(dir, int(uid), int(gid)); err != nil {
			os.RemoveAll(dir)
			return nil, err
		}
	}
	if err := s.run("initdb", "-D", s.data(), "-U", "postgres", "--auth=trust", "-E", "UTF8", "--locale=C.UTF-8", "--no-sync"); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	opts := fmt.Sprintf("-c listen_addresses='' -c unix_socket_directories='%s' -c fsync=off -c synchronous_commit=off -c full_page_writes=off -c max_connections=200", dir)
	if err := s.run("pg_ctl", "-D", s.data(), "-o", opts, "-l", filepath.Join(dir, "log"), "-w", "-t", "60", "start"); err != nil {
		log, _ := os.ReadFile(filepath.Join(dir, "log"))
		os.RemoveAll(dir)
		return nil, fmt.Errorf("%w\nserver log:\n%s", err, log)
	}
	return s, nil
}

func (s *Server) data() string { return filepath.Join(s.dir, "data") }

// run runs a server program as the server's user.
func (s *Server) run(prog string, args ...string) error {
	cmd := exec.Command(filepath.Join(s.bin, prog), args...)
	cmd.Dir = s.dir
	if s.cred != nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: s.cred}
	}
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("%w: %s: %v\n%s", ErrNoServer, prog, err, out)
	}
	return nil
}

// Stop stops the server (fast shutdown) and removes its directory.
func (s *Server) Stop() error {
	err := s.run("pg_ctl", "-D", s.data(), "-m", "immediate", "-w", "stop")
	return errors.Join(err, os.RemoveAll(s.dir))
}

// URL is the postgres:// URL of database db on the server (user postgres,
// through the unix socket).
func (s *Server) URL(db string) string {
	u := url.URL{Scheme: "postgres", User: url.User("postgres"), Host: "", Path: "/" + db}
	u.RawQuery = url.Values{"host": {s.dir}}.Encode()
	return u.String()
}

// NewDatabase creates an empty database and returns its URL; the test's
// cleanup drops it (with whatever connections are still open to it).
func (s *Server) NewDatabase(t testing.TB) string {
	t.Helper()
	name := fmt.Sprintf("t%d", s.next.Add(1))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, err := pgx.Connect(ctx, s.URL("postgres"))
	if err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	defer c.Close(ctx)
	if _, err := c.Exec(ctx, "CREATE DATABASE "+name+" TEMPLATE template0"); err != nil {
		t.Fatalf("pgtest: create database: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		c, err := pgx.Connect(ctx, s.URL("postgres"))
		if err != nil {
			t.Errorf("pgtest: %v", err)
			return
		}
		defer c.Close(ctx)
		if _, err := c.Exec(ctx, "DROP DATABASE "+name+" WITH (FORCE)"); err != nil {
			t.Errorf("pgtest: drop database: %v", err)
		}
	})
	return s.URL(name)
}

// The package's server, started by the first Need: nil, with why in
// startErr, when none could be started.
var (
	once     sync.Once
	server   *Server
	startErr error
)

// Main runs a package's tests (m.Run), stops the server the first test
// that needed one started (Stop), and exits with their status.
func Main(m *testing.M) {
	code := m.Run()
	if err := Stop(); err != nil {
		fmt.Fprintf(os.Stderr, "pgtest: stop: %v\n", err)
		code = max(code, 1)
	}
	os.Exit(code)
}

// Stop stops the package's server, if a test started one. A TestMain
// that cannot call Main calls it after m.Run.
func Stop() error {
	once.Do(func() { startErr = errors.New("pgtest: stopped") }) // none started: none from now on
	if server == nil {
		return nil
	}
	s := server
	server = nil
	return s.Stop()
}

// Need returns the package's server, started by the first call (one for
// the package's tests; Main or Stop stops it). Without one the test skips
// saying why, or fails under CI=true.
func Need(t testing.TB) *Server {
	t.Helper()
	once.Do(func() {
		server, startErr = Start()
		if startErr != nil {
			fmt.Fprintf(os.Stderr, "pgtest: cannot start a PostgreSQL server: %v\n", startErr)
		}
	})
	if server != nil {
		return server
	}
	why := startErr
	if os.Getenv("CI") == "true" {
		t.Fatalf("no PostgreSQL server (CI=true: the PostgreSQL tests must run): %v", why)
	}
	t.Skipf("no PostgreSQL server, skipping: %v", why)
	return nil
}

// Database returns the URL of a new empty database of the package's
// server (Need, NewDatabase).
func Database(t testing.TB) string {
	t.Helper()
	return Need(t).NewDatabase(t)
}
