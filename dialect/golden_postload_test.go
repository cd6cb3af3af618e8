package dialect

func init() {
	goldenCases = append(goldenCases,
		goldenCase{"PostLoadInsert", "", func(d Dialect, _ fixture) string { return d.PostLoadInsert() }},
		goldenCase{"PostLoadList", "", func(d Dialect, _ fixture) string { return d.PostLoadList() }},
		goldenCase{"PostLoadDone", "", func(d Dialect, _ fixture) string { return d.PostLoadDone() }},
		goldenCase{"PostLoadState", "", func(d Dialect, _ fixture) string { return d.PostLoadState() }},
		goldenCase{"PostLoadResume", "", func(d Dialect, _ fixture) string { return d.PostLoadResume() }},
	)
}
