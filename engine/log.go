package engine

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/blackbox-audit/blackbox/core"
)

// The attributes of the engine's warnings that concern one item (a
// processor that failed it every try, a completion skipped, the first
// drop or downgraded publish of a queue, a dispatch a stop or a kill cut, a
// worker stalled on it):
// its feed, its group (the queue's, or the worker's), its sequence and,
// for an item with a source position, that position as a recording has
// it: a group of the position's key and offset. The message names them
// too, so that a handler may leave them out of a text line.
const (
	LogFeed     = "feed"
	LogGroup    = "group"
	LogSeq      = "seq"
	LogPosition = "position"
)

// itemAttrs are the attributes of a warning about item seq of feed in
// group, at pos (nil: an item without a source position).
func itemAttrs(feed, group string, seq int64, pos *core.Position) []slog.Attr {
	as := []slog.Attr{slog.String(LogFeed, feed), slog.String(LogGroup, group), slog.Int64(LogSeq, seq)}
	if pos != nil {
		as = append(as, slog.Group(LogPosition, slog.String("key", pos.Key), slog.Int64("offset", pos.Offset)))
	}
	return as
}

// warnItem logs a warning about an item, with its attributes (itemAttrs).
func (e *Engine) warnItem(item []slog.Attr, format string, args ...any) {
	e.cfg.Logger.LogAttrs(context.Background(), slog.LevelWarn, "blackbox engine: "+fmt.Sprintf(format, args...), item...)
}

// positionOf is d's position, nil for an item without one.
func positionOf(d *core.Delivery) *core.Position {
	if d == nil {
		return nil
	}
	return &d.Position
}
