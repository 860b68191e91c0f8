/* write.c: being written */
