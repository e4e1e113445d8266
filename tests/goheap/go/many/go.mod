module pfrtest/many

go 1.19
