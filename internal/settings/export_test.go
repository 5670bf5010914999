package settings

// CheckSchema is checkSchema, for the benchmark that weighs it against the whole of Derive.
var CheckSchema = checkSchema
