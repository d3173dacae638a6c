package pgstore

import (
	"context"
	"sync"

	"github.com/jackc/pgx/v5/pgxpool"
)

// pools shares one connection pool per connection string among the open
// recordings of a process (a command reading a group's runs, readers
// opened while a run is written): a PostgreSQL connection is a server
// process, too costly to start per Open. A pool is closed when the last
// recording using it closes. Safe for concurrent use.
var pools struct {
	sync.Mutex
	m map[string]*sharedPool
}

type sharedPool struct {
	pool *pgxpool.Pool
	refs int
}

// acquirePool returns the shared pool of conn, creating it (without
// connecting yet) if none is open; releasePool gives it back.
func acquirePool(ctx context.Context, conn string) (*pgxpool.Pool, error) {
	pools.Lock()
	defer pools.Unlock()
	if sp, ok := pools.m[conn]; ok {
		sp.refs++
		return sp.pool, nil
	}
	p, err := pgxpool.New(ctx, conn)
	if err != nil {
		return nil, err
	}
	if pools.m == nil {
		pools.m = map[string]*sharedPool{}
	}
	pools.m[conn] = &sharedPool{pool: p, refs: 1}
	return p, nil
}

// releasePool releases a pool acquirePool returned for conn: the last
// release closes it.
func releasePool(conn string, p *pgxpool.Pool) {
	pools.Lock()
	sp, ok := pools.m[conn]
	if !ok || sp.pool != p {
		pools.Unlock()
		p.Close()
		return
	}
	sp.refs--
	if sp.refs > 0 {
		pools.Unlock()
		return
	}
	delete(pools.m, conn)
	pools.Unlock()
	p.Close() // waits for its connections to be returned: outside the lock
}
