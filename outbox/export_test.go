package outbox

// SetBeforeCompact makes f run right before o's clean Close rewrites the
// marks as a header (every batch delivered and marked): the marks file as
// a crash at that moment leaves it.
func SetBeforeCompact(o *Outbox, f func()) { o.beforeCompact = f }
