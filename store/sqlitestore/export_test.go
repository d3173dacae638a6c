package sqlitestore

// ChunkRows is chunkRows, for tests of Appends around it.
const ChunkRows = chunkRows
