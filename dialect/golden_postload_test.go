package dialect

func init() {
	goldenCases = append(goldenCases,
		goldenCase{"PostLoadHelper", "", func(d Dialect, _ fixture) string { return d.PostLoadHelper() }},
		goldenCase{"PostLoadInsert", "", func(d Dialect, _ fixture) string { return d.PostLoadInsert() }},
		goldenCase{"PostLoadList", "", func(d Dialect, _ fixture) string { return d.PostLoadList() }},
		goldenCase{"PostLoadDone", "", func(d Dialect, _ fixture) string { return d.PostLoadDone() }},
	)
}
