package evergreen

// Golden is golden for the external tests (one -update flag per binary).
var Golden = golden
