/* export.c: being written */
