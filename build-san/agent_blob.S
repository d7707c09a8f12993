.section .rodata
.global gr_agent_blob
.global gr_agent_blob_end
.balign 16
gr_agent_blob:
.incbin "build-san/agent.gz"
gr_agent_blob_end:
.section .note.GNU-stack,"",@progbits
