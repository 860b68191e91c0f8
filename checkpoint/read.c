/* read.c: being written */
