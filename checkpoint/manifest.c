/* manifest.c: being written */
