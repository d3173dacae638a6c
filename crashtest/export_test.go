package crashtest

// ExtrasExplained runs the accounting of the extra --out lines of an app
// without durable state (checkExtrasExplained) over the killed runs' and
// the last run's recordings (stores), the --out line count after each kill
// (outputs) and the extra lines counted (duplicates); it returns the
// failures it finds.
func ExtrasExplained(stores []string, outputs []int64, duplicates int) ([]string, error) {
	s := &setup{}
	rep := &Report{Kills: make([]KillReport, len(outputs)), Duplicates: duplicates}
	err := s.checkExtrasExplained(rep, stores, outputs)
	return rep.Failures, err
}
