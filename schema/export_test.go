package schema

// SetAutoShardRows sets the rows of a shard under shards: auto, and
// returns the function that restores it.
func SetAutoShardRows(n int64) func() {
	was := autoShardRows
	autoShardRows = n
	return func() { autoShardRows = was }
}
