/* commit.c: being written */
